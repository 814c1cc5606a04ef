use super::*;

/// A client frame as a browser writes it: masked with `mask`.
fn client_frame(fin: bool, opcode: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
    let mut out = vec![if fin { 0x80 } else { 0 } | opcode];
    match payload.len() {
        n @ 0..=125 => out.push(0x80 | n as u8),
        n @ 126..=0xFFFF => {
            out.push(0x80 | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(0x80 | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    out
}

fn read_all(reader: &mut WsReader, mut bytes: &[u8]) -> Result<Vec<WsMessage>, WsViolation> {
    let mut got = Vec::new();
    loop {
        match reader.next(bytes)? {
            Progress::Message(used, m) => {
                got.push(m);
                bytes = &bytes[used..];
            }
            Progress::Fragment(used) => bytes = &bytes[used..],
            Progress::Need(_) => return Ok(got),
        }
    }
}

#[test]
fn masked_text_and_binary_messages_of_every_length_form_read_back() {
    for len in [0usize, 1, 5, 125, 126, 1000, 65_535, 65_536, 200_000] {
        let payload: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
        let mut r = WsReader::new(1 << 20);
        let frame = client_frame(true, TEXT, &payload, [1, 2, 3, 0xFF]);
        assert_eq!(
            r.next(&frame).unwrap(),
            Progress::Message(frame.len(), WsMessage::Text(payload.clone())),
            "{len}"
        );
        let frame = client_frame(true, BINARY, &payload, [9, 8, 7, 6]);
        assert_eq!(
            r.next(&frame).unwrap(),
            Progress::Message(frame.len(), WsMessage::Binary(payload))
        );
    }
}

#[test]
fn a_frame_cut_anywhere_asks_for_more_and_never_consumes_part_of_it() {
    let frame = client_frame(true, TEXT, &[b'x'; 300], [5, 6, 7, 8]);
    let mut r = WsReader::new(1 << 20);
    for cut in 0..frame.len() {
        match r.next(&frame[..cut]).unwrap() {
            Progress::Need(n) => assert!(n > cut && n <= frame.len(), "cut {cut}: need {n}"),
            other => panic!("cut {cut}: {other:?}"),
        }
    }
    assert!(matches!(r.next(&frame).unwrap(), Progress::Message(n, _) if n == frame.len()));
}

#[test]
fn fragments_are_joined_and_control_frames_may_come_between_them() {
    let mut bytes = client_frame(false, TEXT, b"{\"jsonrpc\":", [1, 1, 1, 1]);
    bytes.extend(client_frame(true, PING, b"hi", [2, 2, 2, 2]));
    bytes.extend(client_frame(false, CONTINUATION, b"\"2.0\",", [3, 3, 3, 3]));
    bytes.extend(client_frame(true, CONTINUATION, b"\"id\":1}", [4, 4, 4, 4]));
    bytes.extend(client_frame(true, CLOSE, &[0x03, 0xE8, b'o', b'k'], [5, 5, 5, 5]));
    let got = read_all(&mut WsReader::new(1024), &bytes).unwrap();
    assert_eq!(
        got,
        vec![
            WsMessage::Ping(b"hi".to_vec()),
            WsMessage::Text(b"{\"jsonrpc\":\"2.0\",\"id\":1}".to_vec()),
            WsMessage::Close(Some(1000)),
        ]
    );
}

#[test]
fn the_size_limit_counts_a_message_across_its_fragments_before_reading_the_payload() {
    let mut r = WsReader::new(10);
    let first = client_frame(false, BINARY, b"123456", [0; 4]);
    assert_eq!(r.next(&first).unwrap(), Progress::Fragment(first.len()));
    let second = client_frame(true, CONTINUATION, b"7890X", [0; 4]);
    assert_eq!(r.next(&second), Err(WsViolation::TooBig));
    // Refused from the head alone: 2^40 bytes announced, none sent.
    let mut huge = vec![0x80 | BINARY, 0x80 | 127];
    huge.extend_from_slice(&(1u64 << 40).to_be_bytes());
    huge.extend_from_slice(&[0; 4]);
    assert_eq!(WsReader::new(1 << 20).next(&huge), Err(WsViolation::TooBig));
    assert_eq!(WsViolation::TooBig.close_code(), 1009);
}

#[test]
fn protocol_violations_are_named_and_close_with_1002_or_1007() {
    let bad: Vec<(Vec<u8>, u16)> = vec![
        (vec![0x81, 0x02, b'h', b'i'], 1002),         // not masked
        (client_frame(true, 0x3, b"", [0; 4]), 1002), // reserved opcode
        (
            {
                let mut f = client_frame(true, TEXT, b"a", [0; 4]);
                f[0] |= 0x40;
                f
            },
            1002,
        ), // RSV1
        (client_frame(false, PING, b"", [0; 4]), 1002), // fragmented control
        (client_frame(true, PING, &[0; 126], [0; 4]), 1002), // control over 125
        (client_frame(true, CONTINUATION, b"x", [0; 4]), 1002), // nothing to continue
        (client_frame(true, CLOSE, &[3], [0; 4]), 1002), // one-byte close
        (client_frame(true, TEXT, &[0xC3, 0x28], [7; 4]), 1007), // not UTF-8
        (client_frame(true, CLOSE, &[3, 0xE8, 0xFF], [7; 4]), 1007), // close reason not UTF-8
    ];
    for (frame, code) in bad {
        let err = WsReader::new(1024).next(&frame).expect_err("refused");
        assert_eq!(err.close_code(), code, "{frame:?}: {err}");
    }
    let mut r = WsReader::new(1024);
    let first = client_frame(false, TEXT, b"a", [0; 4]);
    r.next(&first).unwrap();
    let err = r.next(&client_frame(true, TEXT, b"b", [0; 4])).unwrap_err();
    assert_eq!(err, WsViolation::Protocol("new message inside a fragmented one"));
}

#[test]
fn server_frames_are_unmasked_with_the_shortest_length_form() {
    for (len, head) in [(0usize, 2usize), (125, 2), (126, 4), (65_535, 4), (65_536, 10)] {
        let mut out = Vec::new();
        write_frame(&mut out, TEXT, &vec![b'z'; len]);
        assert_eq!(out.len(), head + len, "{len}");
        assert_eq!(out[0], 0x81);
        assert_eq!(out[1] & 0x80, 0, "server frames are never masked");
    }
    let mut out = Vec::new();
    write_close(&mut out, CLOSE_POLICY, &"é".repeat(100));
    assert_eq!(out[0], 0x88);
    assert!(out[1] as usize <= 125, "a close frame is a control frame");
    assert_eq!(u16::from_be_bytes([out[2], out[3]]), 1008);
    assert!(
        std::str::from_utf8(&out[4..]).is_ok(),
        "the reason is cut on a character boundary"
    );
}

//! Reading a call's params: the router looks at a few of them (an account key, a list of keys) to pick a
//! side, and leaves the rest to the upstream as the client sent them.

use prism_wire::jsonscan::{elements, nth_element, plain_str};

use crate::pubkey::Pubkey;

/// `params[n]` when it is a plain (unescaped) string.
pub(super) fn param_str(params: Option<&[u8]>, n: usize) -> Option<&str> {
    nth_element(params?, n).and_then(plain_str)
}

/// `params[0]` as an array of account keys: the raw elements and the keys; `None` unless every element is
/// a base58 key.
pub(super) fn keys_param(params: Option<&[u8]>) -> Option<(Vec<&[u8]>, Vec<Pubkey>)> {
    keys_in(nth_element(params?, 0)?)
}

/// A JSON array of account keys: the raw elements and the keys; `None` unless every element is one.
pub(super) fn keys_in(array: &[u8]) -> Option<(Vec<&[u8]>, Vec<Pubkey>)> {
    let items = elements(array)?;
    let keys = items
        .iter()
        .map(|i| plain_str(i).and_then(Pubkey::from_base58))
        .collect::<Option<Vec<_>>>()?;
    Some((items, keys))
}

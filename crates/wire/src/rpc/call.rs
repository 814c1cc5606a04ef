//! One JSON-RPC call as every layer sees it: byte spans of the client's request, never re-serialised.

use std::borrow::Cow;

/// One well-formed call: spans borrow the original request body (the edge's envelope parser makes them).
#[derive(Debug, Clone, PartialEq)]
pub struct Call<'a> {
    /// Raw bytes of the id value; `None` for a notification.
    pub id: Option<&'a [u8]>,
    /// The method name, unescaped.
    pub method: Cow<'a, str>,
    /// Raw bytes of the params value (an array or object), if present.
    pub params: Option<&'a [u8]>,
}

impl Call<'_> {
    pub fn is_notification(&self) -> bool {
        self.id.is_none()
    }
}

//! What a key's `verify` table asks for, ready for the request path (`core::call::verify` does the reading).
//! Its own file so `core::call::outcome` (the `Caller` carries it) does not import the verified-read machinery.

use prism_config::{VerifyConfig, WhenShort};
use prism_wire::rpc::methods::{method_index, verified_set};

/// One key's verified reads, ready for the request path: one bit per method of the table, so the check a
/// read pays when the key verifies nothing is one comparison.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VerifyRule {
    methods: u128,
    pub quorum: u8,
    pub unverified_when_short: bool,
}

impl VerifyRule {
    /// Nothing verified.
    pub const OFF: VerifyRule = VerifyRule {
        methods: 0,
        quorum: 0,
        unverified_when_short: false,
    };

    /// The rule a key's `verify` table asks for; `Err((field, message))` names what is wrong, the field
    /// relative to the key (`verify.methods[2]`).
    pub fn from_config(c: &VerifyConfig) -> Result<VerifyRule, (String, String)> {
        if !(2..=MAX_QUORUM).contains(&c.quorum) {
            return Err((
                "verify.quorum".into(),
                format!("must be between 2 and {MAX_QUORUM} (providers that must agree)"),
            ));
        }
        if c.methods.is_empty() {
            return Err((
                "verify.methods".into(),
                "must name at least one method or family".into(),
            ));
        }
        let methods = verified_set(&c.methods).map_err(|(i, why)| (format!("verify.methods[{i}]"), why))?;
        Ok(VerifyRule {
            methods,
            quorum: c.quorum as u8,
            unverified_when_short: c.when_short == WhenShort::Unverified,
        })
    }

    /// Whether `method` is verified for this key.
    #[inline]
    pub fn covers(&self, method: &str) -> bool {
        self.methods != 0 && {
            let i = method_index(method);
            i < 128 && self.methods & (1u128 << i) != 0
        }
    }
}

/// The largest quorum a key may ask for.
pub const MAX_QUORUM: u32 = 8;

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(methods: &[&str], quorum: u32) -> VerifyConfig {
        VerifyConfig {
            methods: methods.iter().map(|m| m.to_string()).collect(),
            quorum,
            when_short: WhenShort::Error,
        }
    }

    #[test]
    fn a_rule_covers_its_methods_and_families_and_refuses_what_cannot_be_verified() {
        let r = VerifyRule::from_config(&cfg(&["eth_getBalance", "logs"], 2)).unwrap();
        assert!(r.covers("eth_getBalance") && r.covers("eth_getLogs"));
        assert!(!r.covers("eth_call") && !r.covers("eth_blockNumber") && !r.covers("vendor_x"));
        let light = VerifyRule::from_config(&cfg(&["light"], 3)).unwrap();
        assert!(light.covers("eth_getTransactionReceipt") && light.covers("eth_getBlockByNumber"));
        assert!(
            !light.covers("eth_gasPrice") && !light.covers("eth_blockNumber"),
            "not pinned to a block"
        );
        assert!(!VerifyRule::OFF.covers("eth_getBalance"));
        let err = |m: &[&str], q| VerifyRule::from_config(&cfg(m, q)).unwrap_err();
        assert_eq!(err(&["eth_sendRawTransaction"], 2).0, "verify.methods[0]");
        assert!(err(&["eth_getBalance", "eth_gasPrice"], 2)
            .1
            .contains("cannot be verified"));
        assert_eq!(err(&["eth_getBalance", "submit"], 2).0, "verify.methods[1]");
        assert_eq!(err(&["eth_getBalance"], 1).0, "verify.quorum");
        assert_eq!(err(&[], 2).0, "verify.methods");
        assert!(err(&["vendor_read"], 2).1.contains("not a method Prism knows"));
    }
}

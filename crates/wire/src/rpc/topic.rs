//! The kinds of `eth_subscribe` topics (metrics count them; the subscriptions hub serves them).

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopicKind {
    NewHeads,
    Logs,
    PendingTransactions,
}

impl TopicKind {
    pub fn name(self) -> &'static str {
        match self {
            TopicKind::NewHeads => "newHeads",
            TopicKind::Logs => "logs",
            TopicKind::PendingTransactions => "newPendingTransactions",
        }
    }
}

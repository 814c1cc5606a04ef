//! `ProviderId`: which provider of a network, as every layer names it. A newtype over the provider's
//! place in the network's config order, so it cannot be confused with a network, shard or method index,
//! and always below [`ProviderId::MAX`] (routing keeps one bit per provider; `prism check` refuses more).

use std::ops::{Index, IndexMut};

/// One provider of one network (its position in the config's `providers` list).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ProviderId(u8);

impl ProviderId {
    /// Providers per network: routing's sets are 64-bit masks.
    pub const MAX: usize = 64;

    /// The provider at `index` in config order. Panics past [`Self::MAX`]: config validation refuses such a
    /// network before anything is built, so reaching it is a bug.
    pub fn new(index: usize) -> Self {
        assert!(index < Self::MAX, "provider index {index} beyond {}", Self::MAX);
        ProviderId(index as u8)
    }

    /// Every provider of a network with `n` of them, in config order.
    pub fn all(n: usize) -> impl Iterator<Item = ProviderId> + Clone {
        (0..n.min(Self::MAX)).map(|i| ProviderId(i as u8))
    }

    /// The providers of `set` among a network's `n`, in config order.
    pub fn in_set(set: u64, n: usize) -> impl Iterator<Item = ProviderId> + Clone {
        ProviderId::all(n).filter(move |p| p.is_in(set))
    }

    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// This provider's bit in a provider set.
    pub const fn bit(self) -> u64 {
        1u64 << self.0
    }

    /// Whether `set` holds this provider.
    pub const fn is_in(self, set: u64) -> bool {
        set & self.bit() != 0
    }
}

impl std::fmt::Display for ProviderId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl<T> Index<ProviderId> for Vec<T> {
    type Output = T;
    fn index(&self, id: ProviderId) -> &T {
        &self[id.index()]
    }
}

impl<T> IndexMut<ProviderId> for Vec<T> {
    fn index_mut(&mut self, id: ProviderId) -> &mut T {
        &mut self[id.index()]
    }
}

impl<T> Index<ProviderId> for [T] {
    type Output = T;
    fn index(&self, id: ProviderId) -> &T {
        &self[id.index()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_index_their_providers_and_name_their_bit() {
        let names = vec!["a", "b", "c"];
        let ids: Vec<_> = ProviderId::all(names.len()).collect();
        assert_eq!(ids.iter().map(|&i| names[i]).collect::<Vec<_>>(), names);
        assert_eq!(ProviderId::new(5).bit(), 32);
        assert!(ProviderId::new(63).is_in(u64::MAX));
        assert!(!ProviderId::new(1).is_in(0b101));
    }

    #[test]
    #[should_panic]
    fn a_65th_provider_is_a_bug() {
        ProviderId::new(64);
    }
}

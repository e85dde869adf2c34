//! The `Fn::Cidr` intrinsic function.
//!
//! `{ "Fn::Cidr": [ipBlock, count, cidrBits] }` splits `ipBlock` into `count` consecutive
//! subnets, each with `cidrBits` host bits, starting at the first address of the block.
//! For IPv4 the subnets have the prefix length `32 - cidrBits`, for IPv6 `128 - cidrBits`.
//!
//! Rules (matching CloudFormation):
//! - `count` is between 1 and 256;
//! - `cidrBits` is between 1 and 32 for an IPv4 block, between 1 and 128 for an IPv6 block;
//! - the subnets may not be larger than the block (their prefix may not be shorter than the
//!   block's own prefix);
//! - the block must hold `count` subnets.
//!
//! A block written with host bits set below its prefix (for example `10.0.0.1/16`) is
//! accepted and treated as its network address (`10.0.0.0/16`), as CloudFormation does.
//! The block must be in CIDR notation (`address/prefix`); surrounding whitespace is not
//! accepted. IPv6 subnets are printed in the canonical compressed form (RFC 5952), for
//! example `2001:db8:0:1::/64`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

/// The largest `count` that `Fn::Cidr` accepts.
pub const MAX_COUNT: u32 = 256;

/// Why `Fn::Cidr` could not compute its subnets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidrError {
    /// The block is not an IPv4 or IPv6 address range in CIDR notation.
    #[error(
        "Fn::Cidr: invalid IP block {block:?}: expected CIDR notation such as \"10.0.0.0/16\" or \"2001:db8::/56\""
    )]
    InvalidBlock { block: String },

    /// `count` is outside 1..=256.
    #[error("Fn::Cidr: count {count} is out of range: it must be between 1 and {MAX_COUNT}")]
    CountOutOfRange { count: u32 },

    /// `cidrBits` is outside 1..=32 (IPv4) or 1..=128 (IPv6).
    #[error(
        "Fn::Cidr: cidrBits {cidr_bits} is out of range for the {family} block {block}: it must be between 1 and {max}"
    )]
    CidrBitsOutOfRange {
        block: String,
        family: &'static str,
        cidr_bits: u32,
        max: u32,
    },

    /// The subnets would be larger than the block itself.
    #[error(
        "Fn::Cidr: cidrBits {cidr_bits} gives /{subnet_prefix} subnets, which are larger than the block {block} (/{block_prefix})"
    )]
    SubnetLargerThanBlock {
        block: String,
        cidr_bits: u32,
        subnet_prefix: u8,
        block_prefix: u8,
    },

    /// The block cannot hold `count` subnets of the requested size.
    #[error(
        "Fn::Cidr: the block {block} holds only {available} /{subnet_prefix} subnet(s), but count is {count}"
    )]
    NotEnoughSpace {
        block: String,
        count: u32,
        subnet_prefix: u8,
        available: u32,
    },
}

/// `Fn::Cidr [ipBlock, count, cidrBits]`: returns `count` consecutive subnets of the block,
/// each with `cidrBits` host bits (so the prefix length is `32 - cidrBits` for IPv4,
/// `128 - cidrBits` for IPv6), starting at the block's first address.
///
/// A block with host bits set (`10.0.0.1/16`) is treated as its network address.
pub fn cidr(ip_block: &str, count: u32, cidr_bits: u32) -> Result<Vec<String>, CidrError> {
    if !(1..=MAX_COUNT).contains(&count) {
        return Err(CidrError::CountOutOfRange { count });
    }
    let net = ip_block
        .parse::<IpNet>()
        .map_err(|_| CidrError::InvalidBlock {
            block: ip_block.to_owned(),
        })?
        .trunc();
    let block = net.to_string();

    let (width, family): (u32, &'static str) = match net {
        IpNet::V4(_) => (32, "IPv4"),
        IpNet::V6(_) => (128, "IPv6"),
    };
    if !(1..=width).contains(&cidr_bits) {
        return Err(CidrError::CidrBitsOutOfRange {
            block,
            family,
            cidr_bits,
            max: width,
        });
    }

    let block_prefix = net.prefix_len();
    // `cidr_bits <= width <= 128`, so the subtraction cannot underflow and fits in a u8.
    let subnet_prefix_wide = width - cidr_bits;
    let subnet_prefix = u8::try_from(subnet_prefix_wide).unwrap_or(u8::MAX);
    if subnet_prefix < block_prefix {
        return Err(CidrError::SubnetLargerThanBlock {
            block,
            cidr_bits,
            subnet_prefix,
            block_prefix,
        });
    }

    // The block holds 2^(subnet_prefix - block_prefix) subnets; only whether that reaches
    // `count` (at most 256 = 2^8) matters, so cap the exponent to avoid overflow.
    let spare_bits = u32::from(subnet_prefix - block_prefix);
    let available: u32 = 1u32 << spare_bits.min(9);
    if count > available {
        return Err(CidrError::NotEnoughSpace {
            block,
            count,
            subnet_prefix,
            available,
        });
    }

    let base: u128 = match net.network() {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    };
    // `cidr_bits` can be 128 only for `::/0` with count 1, where the step is never used.
    let step: u128 = 1u128.checked_shl(cidr_bits).unwrap_or(0);

    let mut out = Vec::with_capacity(count as usize);
    let mut addr = base;
    for i in 0..count {
        if i > 0 {
            // The space check above guarantees that every subnet lies inside the block,
            // so this never wraps; stay panic-free anyway.
            addr = addr.wrapping_add(step);
        }
        let text = match net {
            IpNet::V4(_) => {
                let v4 = Ipv4Addr::from(u32::try_from(addr).unwrap_or(u32::MAX));
                format!("{v4}/{subnet_prefix}")
            }
            IpNet::V6(_) => format!("{}/{subnet_prefix}", Ipv6Addr::from(addr)),
        };
        out.push(text);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ipnet::{Ipv4Net, Ipv6Net};
    use proptest::prelude::*;

    fn strs(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn documented_ipv4_example() {
        assert_eq!(
            cidr("192.168.0.0/24", 6, 5).unwrap(),
            strs(&[
                "192.168.0.0/27",
                "192.168.0.32/27",
                "192.168.0.64/27",
                "192.168.0.96/27",
                "192.168.0.128/27",
                "192.168.0.160/27",
            ])
        );
    }

    #[test]
    fn ipv6_example() {
        assert_eq!(
            cidr("2001:db8::/56", 4, 64).unwrap(),
            strs(&[
                "2001:db8::/64",
                "2001:db8:0:1::/64",
                "2001:db8:0:2::/64",
                "2001:db8:0:3::/64",
            ])
        );
    }

    #[test]
    fn vpc_style_ipv6_block_from_getatt() {
        // A /56 as EC2 assigns it, split into /64 subnets (cidrBits 64).
        assert_eq!(
            cidr("2600:1f18:abc:de00::/56", 3, 64).unwrap(),
            strs(&[
                "2600:1f18:abc:de00::/64",
                "2600:1f18:abc:de01::/64",
                "2600:1f18:abc:de02::/64",
            ])
        );
    }

    #[test]
    fn common_vpc_split() {
        assert_eq!(
            cidr("10.0.0.0/16", 3, 8).unwrap(),
            strs(&["10.0.0.0/24", "10.0.1.0/24", "10.0.2.0/24"])
        );
    }

    #[test]
    fn host_bits_are_ignored() {
        assert_eq!(
            cidr("10.0.0.1/16", 2, 8).unwrap(),
            cidr("10.0.0.0/16", 2, 8).unwrap()
        );
        assert_eq!(
            cidr("2001:db8::1234/56", 1, 64).unwrap(),
            strs(&["2001:db8::/64"])
        );
    }

    #[test]
    fn whole_block_as_one_subnet() {
        assert_eq!(cidr("10.0.0.0/24", 1, 8).unwrap(), strs(&["10.0.0.0/24"]));
        assert_eq!(cidr("0.0.0.0/0", 1, 32).unwrap(), strs(&["0.0.0.0/0"]));
        assert_eq!(cidr("::/0", 1, 128).unwrap(), strs(&["::/0"]));
    }

    #[test]
    fn exactly_full_block() {
        let all = cidr("10.0.0.0/24", 256, 1).unwrap_err();
        // /31 subnets in a /24: only 128 fit.
        assert!(matches!(
            all,
            CidrError::NotEnoughSpace { available: 128, .. }
        ));
        let v = cidr("10.0.0.0/24", 128, 1).unwrap();
        assert_eq!(v.len(), 128);
        assert_eq!(v[127], "10.0.0.254/31");
        let v = cidr("10.0.0.0/16", 256, 8).unwrap();
        assert_eq!(v.last().unwrap(), "10.0.255.0/24");
    }

    #[test]
    fn top_of_address_space() {
        assert_eq!(
            cidr("255.255.255.0/24", 2, 7).unwrap(),
            strs(&["255.255.255.0/25", "255.255.255.128/25"])
        );
        assert_eq!(
            cidr("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ff00/120", 2, 7).unwrap(),
            strs(&[
                "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ff00/121",
                "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ff80/121",
            ])
        );
    }

    #[test]
    fn invalid_blocks() {
        for bad in [
            "",
            "10.0.0.0",
            "10.0.0.0/33",
            "10.0.0/16",
            "256.0.0.0/8",
            "10.0.0.0/-1",
            "not-a-cidr",
            " 10.0.0.0/16",
            "10.0.0.0/16 ",
            "2001:db8::/129",
            "2001:db8:::/64",
        ] {
            let err = cidr(bad, 1, 1).unwrap_err();
            assert_eq!(
                err,
                CidrError::InvalidBlock {
                    block: bad.to_owned()
                },
                "{bad:?}"
            );
            assert!(err.to_string().contains(&format!("{bad:?}")));
        }
    }

    #[test]
    fn count_out_of_range() {
        assert_eq!(
            cidr("10.0.0.0/8", 0, 8),
            Err(CidrError::CountOutOfRange { count: 0 })
        );
        assert_eq!(
            cidr("10.0.0.0/8", 257, 8),
            Err(CidrError::CountOutOfRange { count: 257 })
        );
        assert!(cidr("10.0.0.0/8", 256, 8).is_ok());
        assert!(
            cidr("10.0.0.0/8", 0, 8)
                .unwrap_err()
                .to_string()
                .contains("between 1 and 256")
        );
    }

    #[test]
    fn cidr_bits_out_of_range() {
        for (block, bits, max) in [
            ("10.0.0.0/8", 0, 32),
            ("10.0.0.0/8", 33, 32),
            ("2001:db8::/32", 0, 128),
            ("2001:db8::/32", 129, 128),
        ] {
            let err = cidr(block, 1, bits).unwrap_err();
            assert!(
                matches!(err, CidrError::CidrBitsOutOfRange { cidr_bits, max: m, .. } if cidr_bits == bits && m == max),
                "{err:?}"
            );
        }
        // 33 is fine for IPv6.
        assert_eq!(
            cidr("2001:db8::/64", 1, 33).unwrap(),
            strs(&["2001:db8::/95"])
        );
    }

    #[test]
    fn subnet_larger_than_block() {
        let err = cidr("10.0.0.0/24", 1, 9).unwrap_err();
        assert_eq!(
            err,
            CidrError::SubnetLargerThanBlock {
                block: "10.0.0.0/24".into(),
                cidr_bits: 9,
                subnet_prefix: 23,
                block_prefix: 24,
            }
        );
        assert_eq!(
            err.to_string(),
            "Fn::Cidr: cidrBits 9 gives /23 subnets, which are larger than the block 10.0.0.0/24 (/24)"
        );
        assert!(matches!(
            cidr("2001:db8::/64", 1, 65),
            Err(CidrError::SubnetLargerThanBlock { .. })
        ));
    }

    #[test]
    fn not_enough_space() {
        let err = cidr("192.168.0.0/24", 9, 5).unwrap_err();
        assert_eq!(
            err,
            CidrError::NotEnoughSpace {
                block: "192.168.0.0/24".into(),
                count: 9,
                subnet_prefix: 27,
                available: 8,
            }
        );
        assert_eq!(
            err.to_string(),
            "Fn::Cidr: the block 192.168.0.0/24 holds only 8 /27 subnet(s), but count is 9"
        );
        assert!(cidr("192.168.0.0/24", 8, 5).is_ok());
        assert!(matches!(
            cidr("2001:db8::/63", 3, 64),
            Err(CidrError::NotEnoughSpace { available: 2, .. })
        ));
        // The same prefix as the block: room for exactly one.
        assert!(matches!(
            cidr("10.0.0.0/24", 2, 8),
            Err(CidrError::NotEnoughSpace { available: 1, .. })
        ));
    }

    /// A valid IPv4 input: (block, count, cidr_bits).
    fn valid_v4() -> impl Strategy<Value = (Ipv4Net, u32, u32)> {
        (any::<u32>(), 0u8..=31)
            .prop_flat_map(|(addr, prefix)| {
                let max_bits = 32 - u32::from(prefix);
                (Just(addr), Just(prefix), 1..=max_bits)
            })
            .prop_flat_map(|(addr, prefix, bits)| {
                let spare = 32 - bits - u32::from(prefix);
                let max_count = 1u32 << spare.min(8);
                let net = Ipv4Net::new(Ipv4Addr::from(addr), prefix).unwrap();
                (Just(net), 1..=max_count, Just(bits))
            })
    }

    /// A valid IPv6 input: (block, count, cidr_bits).
    fn valid_v6() -> impl Strategy<Value = (Ipv6Net, u32, u32)> {
        (any::<u128>(), 0u8..=127)
            .prop_flat_map(|(addr, prefix)| {
                let max_bits = 128 - u32::from(prefix);
                (Just(addr), Just(prefix), 1..=max_bits)
            })
            .prop_flat_map(|(addr, prefix, bits)| {
                let spare = 128 - bits - u32::from(prefix);
                let max_count = 1u32 << spare.min(8);
                let net = Ipv6Net::new(Ipv6Addr::from(addr), prefix).unwrap();
                (Just(net), 1..=max_count, Just(bits))
            })
    }

    /// Checks the subnets: right count and prefix, inside the block, starting at its
    /// network address, consecutive (each starts right after the previous one ends) and
    /// therefore disjoint.
    fn check(block: IpNet, count: u32, bits: u32, width: u32, out: &[String]) {
        let block = block.trunc();
        assert_eq!(out.len(), count as usize);
        let nets: Vec<IpNet> = out.iter().map(|s| s.parse().unwrap()).collect();
        let to_u128 = |a: IpAddr| match a {
            IpAddr::V4(a) => u128::from(u32::from(a)),
            IpAddr::V6(a) => u128::from(a),
        };
        for (i, n) in nets.iter().enumerate() {
            // Printed form is canonical and a network address.
            assert_eq!(n.to_string(), out[i]);
            assert_eq!(*n, n.trunc());
            assert_eq!(u32::from(n.prefix_len()), width - bits);
            assert!(block.contains(n), "{n} not in {block}");
            if i == 0 {
                assert_eq!(n.network(), block.network());
            } else {
                let prev = nets[i - 1];
                assert_eq!(to_u128(prev.broadcast()) + 1, to_u128(n.network()));
            }
        }
        for (i, a) in nets.iter().enumerate() {
            for b in &nets[i + 1..] {
                assert!(!a.contains(b) && !b.contains(a));
            }
        }
    }

    proptest! {
        #[test]
        fn ipv4_subnets_are_consecutive_inside_and_disjoint((net, count, bits) in valid_v4()) {
            let out = cidr(&net.to_string(), count, bits).unwrap();
            check(IpNet::V4(net), count, bits, 32, &out);
        }

        #[test]
        fn ipv6_subnets_are_consecutive_inside_and_disjoint((net, count, bits) in valid_v6()) {
            let out = cidr(&net.to_string(), count, bits).unwrap();
            check(IpNet::V6(net), count, bits, 128, &out);
        }

        #[test]
        fn never_panics(block in ".{0,50}", count in any::<u32>(), bits in any::<u32>()) {
            let _ = cidr(&block, count, bits);
        }

        #[test]
        fn never_panics_on_real_blocks(
            net in prop_oneof![
                any::<(u32, u8)>().prop_map(|(a, p)| format!("{}/{}", Ipv4Addr::from(a), p % 33)),
                any::<(u128, u8)>().prop_map(|(a, p)| format!("{}/{}", Ipv6Addr::from(a), p % 129)),
            ],
            count in 0u32..300,
            bits in 0u32..140,
        ) {
            if let Ok(v) = cidr(&net, count, bits) {
                prop_assert_eq!(v.len(), count as usize);
            }
        }
    }
}

//! Interrupt coalescing and adaptive moderation (`nic-coalesce`): which
//! adaptive mode governs a fixed value, and what drivers do with a fixed
//! value while it is on, as data with sources.

/// The adaptive mode that overrides each fixed value while on:
/// include/uapi/linux/ethtool.h, `struct ethtool_coalesce` (adaptive
/// moderation picks the rx or tx values itself; `*-low`/`*-high` and
/// `pkt-rate-*` are its own parameters, not governed by it).
pub const GOVERNED: [(&str, &str); 8] = [
    ("rx-usecs", "adaptive-rx"),
    ("rx-frames", "adaptive-rx"),
    ("rx-usecs-irq", "adaptive-rx"),
    ("rx-frames-irq", "adaptive-rx"),
    ("tx-usecs", "adaptive-tx"),
    ("tx-frames", "adaptive-tx"),
    ("tx-usecs-irq", "adaptive-tx"),
    ("tx-frames-irq", "adaptive-tx"),
];

/// The adaptive modes that must be off for `field` to be set on `driver`.
pub fn governing(driver: Option<&DriverCoalesce>, field: &str) -> Vec<&'static str> {
    if driver.is_some_and(|d| d.needs_both_off.contains(&field)) {
        return vec!["adaptive-rx", "adaptive-tx"];
    }
    GOVERNED
        .iter()
        .filter(|(f, _)| *f == field)
        .map(|(_, a)| *a)
        .collect()
}

/// What a driver does with a changed fixed value while adaptive is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnderAdaptive {
    /// The write fails (`EINVAL`).
    Refuses,
    /// The write succeeds and reads back, but adaptive moderation sets the
    /// hardware as it likes.
    Overrides,
}

/// One family of drivers' coalescing rules.
pub struct DriverCoalesce {
    pub drivers: &'static [&'static str],
    pub under_adaptive: UnderAdaptive,
    /// `rx-usecs`/`tx-usecs` granularity in µs (1: any value).
    pub usecs_step: u32,
    /// The largest `rx-usecs`/`tx-usecs` taken; `None`: not checked here.
    pub usecs_max: Option<u32>,
    /// Fixed values that need both adaptive modes off.
    pub needs_both_off: &'static [&'static str],
    pub source: &'static str,
}

pub const DRIVERS: [DriverCoalesce; 4] = [
    DriverCoalesce {
        drivers: &["ice"],
        under_adaptive: UnderAdaptive::Refuses,
        usecs_step: 2,
        usecs_max: Some(8160),
        needs_both_off: &["rx-usecs-high"],
        source: "drivers/net/ethernet/intel/ice/ice_ethtool.c `ice_set_rc_coalesce` (EINVAL: \
                 \"interrupt throttling cannot be changed if adaptive-rx is enabled\"; \
                 rx-usecs-high needs both adaptive modes off), `ice_print_if_odd_usecs` (odd \
                 values rounded down, read back as given); ice_txrx.h `ICE_ITR_MAX` 8160, \
                 `ICE_ITR_GRAN_US` 2",
    },
    DriverCoalesce {
        drivers: &["i40e"],
        under_adaptive: UnderAdaptive::Refuses,
        usecs_step: 2,
        usecs_max: Some(8160),
        needs_both_off: &[],
        source: "drivers/net/ethernet/intel/i40e/i40e_ethtool.c `i40e_set_itr_per_queue` \
                 (EINVAL: \"RX interrupt moderation cannot be changed if adaptive-rx is \
                 enabled\"); i40e_txrx.h `I40E_MAX_ITR` 8160, `I40E_ITR_MASK` 0x1FFE (2 µs)",
    },
    DriverCoalesce {
        drivers: &["iavf"],
        under_adaptive: UnderAdaptive::Refuses,
        usecs_step: 2,
        usecs_max: Some(8160),
        needs_both_off: &[],
        source: "drivers/net/ethernet/intel/iavf/iavf_ethtool.c `iavf_set_itr_per_queue` \
                 (EINVAL while adaptive is on); iavf_txrx.h `IAVF_MAX_ITR` 8160, \
                 `IAVF_ITR_MASK` 0x1FFE (2 µs)",
    },
    DriverCoalesce {
        drivers: &["mlx5_core"],
        under_adaptive: UnderAdaptive::Overrides,
        usecs_step: 1,
        usecs_max: None,
        needs_both_off: &[],
        source: "drivers/net/ethernet/mellanox/mlx5/core/en_ethtool.c \
                 `mlx5e_ethtool_set_coalesce` (stores the values), en_dim.c and lib/dim \
                 (DIM sets the moderation while adaptive is on)",
    },
];

/// The rules of `driver`, when this table has them.
pub fn of(driver: Option<&str>) -> Option<&'static DriverCoalesce> {
    let d = driver?;
    DRIVERS.iter().find(|r| r.drivers.contains(&d))
}

/// Why `driver` would not do what `field: value` asks, from its step and
/// maximum (before any adaptive check).
pub fn value_refusal(rules: &DriverCoalesce, field: &str, value: u32) -> Option<String> {
    if !matches!(field, "rx-usecs" | "tx-usecs") {
        return None;
    }
    let driver = rules.drivers[0];
    if let Some(max) = rules.usecs_max
        && value > max
    {
        return Some(format!(
            "{field} {value} is above {max}, the most {driver} takes ({})",
            rules.source
        ));
    }
    let step = rules.usecs_step;
    (step > 1 && !value.is_multiple_of(step)).then(|| {
        let down = value - value % step;
        format!(
            "{field} {value}: {driver} sets the hardware in steps of {step} µs, so it would run \
             {down} while reading back {value}; give {down} or {} ({})",
            down + step,
            rules.source
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ice_takes_even_values_up_to_its_maximum_and_mlx5_any() {
        let ice = of(Some("ice")).unwrap();
        assert!(value_refusal(ice, "rx-usecs", 8).is_none());
        let odd = value_refusal(ice, "rx-usecs", 7).unwrap();
        assert!(odd.contains("give 6 or 8"), "{odd}");
        assert!(
            value_refusal(ice, "tx-usecs", 8162)
                .unwrap()
                .contains("above 8160")
        );
        assert!(value_refusal(ice, "rx-frames", 7).is_none());
        let mlx5 = of(Some("mlx5_core")).unwrap();
        assert!(value_refusal(mlx5, "rx-usecs", 7).is_none());
        assert_eq!(governing(Some(ice), "rx-usecs-high").len(), 2);
        assert_eq!(governing(None, "tx-frames"), vec!["adaptive-tx"]);
        assert!(governing(None, "rx-usecs-high").is_empty());
        assert!(of(Some("e1000e")).is_none());
    }
}

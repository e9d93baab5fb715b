//! One channel request: every channel count a knob sets on one interface
//! goes to the kernel in one `ETHTOOL_SCHANNELS` (one state-file write in a
//! tree), since the kernel checks the counts together. Its locator names
//! the fields it sets (`ethtool:IF/channels/combined,rx,tx`), its value
//! says each (`combined 0, rx 4, tx 4`); a request of one field keeps the
//! plain form (`ethtool:IF/channels/combined`, `8`) that older journals hold.

use std::io;

use super::{CHANNEL_FIELDS, Channels, Field, Section, State};

/// The fields a channel locator's name lists (`combined,rx,tx`).
pub fn names(name: &str) -> Vec<&str> {
    name.split(',').collect()
}

/// The locator of a request setting `fields` of `ifname`'s channels.
pub fn field(ifname: &str, fields: &[&str]) -> Field {
    Field::new(ifname, Section::Channels, &fields.join(","))
}

/// A request's value in its words: the number for one field, else
/// `combined 0, rx 4, tx 4`.
pub fn words(pairs: &[(&str, String)]) -> String {
    match pairs {
        [(_, v)] => v.clone(),
        _ => pairs
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// Today's value of the fields `name` lists, in the request's words.
pub fn value(c: &Channels, name: &str) -> Option<String> {
    let pairs: Option<Vec<(&str, String)>> = names(name)
        .into_iter()
        .map(|n| Some((n, c.get(n)?.current.to_string())))
        .collect();
    Some(words(&pairs?))
}

/// A value's fields one by one (a channel request of several fields as
/// one per field, for the files that name each: `.link`, NetworkManager).
pub fn each(f: &Field, text: &str) -> Vec<(Field, String)> {
    match (f.section, parse(&f.name, text)) {
        (Section::Channels, Ok(request)) if request.len() > 1 => request
            .into_iter()
            .map(|(k, v)| (Field::new(&f.ifname, Section::Channels, &k), v.to_string()))
            .collect(),
        _ => vec![(f.clone(), text.to_string())],
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// The counts a request's `text` sets, for the fields `name` lists (in its order).
pub fn parse(name: &str, text: &str) -> io::Result<Vec<(String, u32)>> {
    let fields = names(name);
    if let Some(bad) = fields.iter().find(|f| !CHANNEL_FIELDS.contains(f)) {
        return Err(invalid(format!("{bad:?} is not a channel type")));
    }
    let number = |t: &str| {
        t.trim()
            .parse::<u32>()
            .map_err(|_| invalid(format!("{t:?} is not a number")))
    };
    if let [one] = fields.as_slice() {
        return Ok(vec![(one.to_string(), number(text)?)]);
    }
    let parts: Vec<&str> = text.trim().split(", ").collect();
    if parts.len() != fields.len() {
        return Err(invalid(format!("{text:?} does not set {name}")));
    }
    fields
        .iter()
        .zip(parts)
        .map(|(f, part)| match part.split_once(' ') {
            Some((k, v)) if k == *f => Ok((k.to_string(), number(v)?)),
            _ => Err(invalid(format!("{text:?} does not set {name}"))),
        })
        .collect()
}

/// `from` with the request's counts.
pub fn with(from: &Channels, request: &[(String, u32)]) -> Channels {
    let mut to = from.clone();
    for (k, v) in request {
        if let Some(p) = to.get_mut(k) {
            p.current = *v;
        }
    }
    to
}

/// Why the kernel refuses channel counts `to` (EINVAL), if it does: a
/// count above the driver's maximum, or no receive or no transmit channel
/// left (net/ethtool/ioctl.c `ethtool_set_channels` and
/// net/ethtool/channels.c `ethnl_set_channels`: "requested channel count is
/// too low"; combined channels count for both directions).
pub fn refused(to: &Channels) -> Option<String> {
    for f in CHANNEL_FIELDS {
        let p = to.get(f)?;
        if p.current > p.max {
            return Some(format!("{f} {} is above the maximum {}", p.current, p.max));
        }
    }
    let c = to.combined.current;
    let left = |own: u32, dir: &str| {
        (c == 0 && own == 0).then(|| {
            format!(
                "combined {c} and {dir} {own} leave no {} channel, which the kernel refuses \
                 (net/ethtool/ioctl.c ethtool_set_channels, net/ethtool/channels.c \
                 ethnl_set_channels: at least one rx and one tx channel, combined counting for both)",
                if dir == "rx" { "receive" } else { "transmit" }
            )
        })
    };
    left(to.rx.current, "rx").or_else(|| left(to.tx.current, "tx"))
}

/// Said once per knob that changes rings or channels: most drivers stop
/// the interface and rebuild its queues for it (ice `ice_vsi_recfg_qs`,
/// i40e `i40e_set_ringparam`/`i40e_reconfig_rss_queues`, mlx5
/// `mlx5e_safe_switch_params`), which also resets per-queue values.
pub const RESETS_LINK: &str = "changing {} resets the link on most drivers (ice, i40e, mlx5 rebuild \
     their queues): traffic stops briefly; hostknob then writes again the per-queue values \
     (rps, xps) and queue IRQ affinities it owns that the driver reset";

/// Why the kernel would refuse a channel request: a count above its
/// maximum, or counts (with today's values of the fields it leaves alone)
/// that leave no receive or no transmit channel ([`refused`]).
pub fn refusal(field: &Field, state: &State, want: &str) -> Option<String> {
    let from = state.channels.as_ref()?;
    let request = parse(&field.name, want).ok()?;
    let driver = state.driver_name(&field.ifname);
    let cmd = field.check_command();
    for (n, v) in &request {
        let max = from.get(n)?.max;
        if *v > max {
            return Some(format!(
                "{} {n} {v} is above the maximum {max} {driver} reports ({cmd})",
                field.ifname
            ));
        }
    }
    let to = with(from, &request);
    refused(&to).map(|why| {
        let fields: Vec<&str> = request.iter().map(|(k, _)| k.as_str()).collect();
        let today = ["combined", "rx", "tx"]
            .into_iter()
            .filter(|k| !fields.contains(k))
            .map(|k| format!("{k} {}", from.get(k).map_or(0, |p| p.current)))
            .collect::<Vec<_>>()
            .join(", ");
        let asked: Vec<String> = request.iter().map(|(k, v)| format!("{k} {v}")).collect();
        format!(
            "{} channels {}{}: {why} ({cmd})",
            field.ifname,
            asked.join(", "),
            match today.is_empty() {
                true => String::new(),
                false => format!(" with today's {today}"),
            }
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ethtool::Pair;

    fn ch(combined: u32, rx: u32, tx: u32) -> Channels {
        let p = |current| Pair { current, max: 64 };
        Channels {
            rx: p(rx),
            tx: p(tx),
            other: Pair::default(),
            combined: p(combined),
        }
    }

    #[test]
    fn a_request_reads_and_says_every_field_and_the_kernels_floor_counts_today() {
        let r = parse("combined,rx,tx", "combined 0, rx 4, tx 4").unwrap();
        assert_eq!(
            r,
            vec![("combined".into(), 0), ("rx".into(), 4), ("tx".into(), 4)]
        );
        assert_eq!(
            value(&with(&ch(16, 0, 0), &r), "combined,rx,tx").unwrap(),
            "combined 0, rx 4, tx 4"
        );
        assert_eq!(
            parse("combined", "8").unwrap(),
            vec![("combined".into(), 8)]
        );
        assert!(parse("combined,rx", "rx 4, combined 0").is_err());
        assert!(parse("combined,bogus", "combined 0, bogus 1").is_err());
        // Separate channels today: combined 0 alone is fine, rx 0 is not.
        assert_eq!(refused(&ch(0, 4, 4)), None);
        assert_eq!(
            refused(&with(&ch(8, 4, 4), &[("combined".into(), 0)])),
            None
        );
        let no_rx = refused(&with(&ch(0, 4, 4), &[("rx".into(), 0)])).unwrap();
        assert!(no_rx.contains("no receive channel"), "{no_rx}");
        let no_tx = refused(&ch(0, 4, 0)).unwrap();
        assert!(no_tx.contains("no transmit channel"), "{no_tx}");
        assert!(
            refused(&ch(65, 0, 0))
                .unwrap()
                .contains("above the maximum 64")
        );
    }
}

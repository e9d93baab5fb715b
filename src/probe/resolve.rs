//! `--connect HOST:PORT` without the C library's resolver: the released
//! binary is static, and glibc's resolver would load the host's NSS modules,
//! which must match the glibc it was built with (so the packages would depend
//! on one glibc). An address is taken as written; a name is looked up in
//! `/etc/hosts` (hosts(5)) and nowhere else.

use anyhow::{Result, bail};
use std::net::{IpAddr, SocketAddr};

/// The hosts file `--connect` names are looked up in.
pub const HOSTS: &str = "/etc/hosts";

/// The live hosts file's text (not a `--root` tree's: the connection is
/// made from this machine); `None` when it cannot be read.
pub fn read_hosts() -> Option<String> {
    crate::root::read_system_file(HOSTS)
}

/// `HOST:PORT` or `[IPv6]:PORT` as a socket address: numeric, or a name from
/// `hosts` (the text of the hosts file; `None` when it could not be read).
pub fn resolve(target: &str, hosts: Option<&str>) -> Result<SocketAddr> {
    if let Ok(a) = target.parse::<SocketAddr>() {
        return Ok(a);
    }
    let Some((host, port)) = target.rsplit_once(':') else {
        bail!("no port: expected HOST:PORT");
    };
    let Ok(port) = port.parse::<u16>() else {
        bail!("port {port:?} is not a number from 0 to 65535: expected HOST:PORT");
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    if host.is_empty() || host.contains(':') {
        bail!("{host:?} is not a host name or an IP address: expected HOST:PORT");
    }
    match hosts.and_then(|text| lookup(text, host)) {
        Some(ip) => Ok(SocketAddr::new(ip, port)),
        None => bail!(
            "host {host:?} is not in {HOSTS}: hostknob looks names up there only (no DNS; \
             its static binary loads no name service), so give the address or add the name to {HOSTS}"
        ),
    }
}

/// The first address `hosts` gives `name` (names compare case-insensitively,
/// `#` starts a comment), as glibc's `files` module answers.
fn lookup(hosts: &str, name: &str) -> Option<IpAddr> {
    hosts.lines().find_map(|line| {
        let line = line.split('#').next().unwrap_or_default();
        let mut fields = line.split_whitespace();
        let ip = fields.next()?.parse::<IpAddr>().ok()?;
        fields.any(|n| n.eq_ignore_ascii_case(name)).then_some(ip)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTS_TEXT: &str = "# static table\n127.0.0.1\tlocalhost\n\
        10.0.0.5 db1.example.net DB1 # the primary\n::1 ip6-localhost\nbogus line\n10.0.0.6 db1\n";

    #[test]
    fn addresses_are_taken_as_written_and_names_come_from_the_hosts_file() {
        let r = |t: &str| resolve(t, Some(HOSTS_TEXT)).map(|a| a.to_string());
        assert_eq!(r("10.1.2.3:80").unwrap(), "10.1.2.3:80");
        assert_eq!(r("[fe80::1]:9").unwrap(), "[fe80::1]:9");
        assert_eq!(r("localhost:7").unwrap(), "127.0.0.1:7");
        // The first line that names it wins; names ignore case; comments are not names.
        assert_eq!(r("db1:5432").unwrap(), "10.0.0.5:5432");
        assert_eq!(r("Db1.Example.Net:1").unwrap(), "10.0.0.5:1");
        assert_eq!(r("[ip6-localhost]:22").unwrap(), "[::1]:22");
        let e = r("primary:1").unwrap_err().to_string();
        assert!(
            e.starts_with("host \"primary\" is not in /etc/hosts"),
            "{e}"
        );
        assert!(
            r("line:1").is_err(),
            "a line without an address names nothing"
        );
    }

    #[test]
    fn a_target_without_a_usable_port_or_hosts_file_says_so() {
        let e = |t: &str, h| resolve(t, h).unwrap_err().to_string();
        assert_eq!(e("db1", Some(HOSTS_TEXT)), "no port: expected HOST:PORT");
        assert!(e("db1:http", Some(HOSTS_TEXT)).starts_with("port \"http\" is not a number"));
        assert!(e("db1:70000", Some(HOSTS_TEXT)).starts_with("port \"70000\""));
        assert!(e(":80", Some(HOSTS_TEXT)).starts_with("\"\" is not a host name"));
        assert!(e("localhost:80", None).starts_with("host \"localhost\" is not in /etc/hosts"));
    }
}

//! The `SIOCETHTOOL` ioctl (include/uapi/linux/ethtool.h): one socket per
//! call, in the caller's network namespace. Only the commands hostknob
//! needs; each struct is the kernel's layout.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const SIOCETHTOOL: libc::c_ulong = 0x8946;

pub const GDRVINFO: u32 = 0x03;
pub const GCOALESCE: u32 = 0x0e;
pub const SCOALESCE: u32 = 0x0f;
pub const GRINGPARAM: u32 = 0x10;
pub const SRINGPARAM: u32 = 0x11;
const GSTRINGS: u32 = 0x1b;
const GPERMADDR: u32 = 0x20;
const GSSET_INFO: u32 = 0x37;
const GFEATURES: u32 = 0x3a;
const SFEATURES: u32 = 0x3b;
pub const GCHANNELS: u32 = 0x3c;
pub const SCHANNELS: u32 = 0x3d;
/// `ETH_SS_FEATURES`: the string set naming the feature bits.
const SS_FEATURES: u32 = 4;

#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

/// Issues one command on `ifname` with `buf` (whose first u32 is the command).
fn call(ifname: &str, buf: *mut libc::c_void) -> io::Result<()> {
    let bytes = ifname.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{ifname:?} is not an interface name"),
        ));
    }
    // Any socket carries SIOCETHTOOL (net/socket.c: sock_do_ioctl falls back to
    // dev_ioctl): AF_INET first, then AF_UNIX as ethtool(8)'s ioctl_init does,
    // for the units' RestrictAddressFamilies=AF_UNIX.
    // SAFETY: socket(2) with constant arguments; the descriptor is owned below.
    let open = |family| unsafe { libc::socket(family, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    let mut fd = open(libc::AF_INET);
    if fd < 0 {
        fd = open(libc::AF_UNIX);
    }
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        data: buf,
        _pad: [0; 16],
    };
    req.name[..bytes.len()].copy_from_slice(bytes);
    // SAFETY: req is a valid ifreq whose data points at a buffer of the
    // command's size, alive for the call.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL as _, &mut req) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A command whose struct is `N` u32 words after `cmd` (channels, rings,
/// coalescing): the words, or the error (`EOPNOTSUPP`: the driver lacks it).
pub fn words<const N: usize>(ifname: &str, cmd: u32) -> io::Result<[u32; N]> {
    let mut buf = vec![0u32; N + 1];
    buf[0] = cmd;
    call(ifname, buf.as_mut_ptr().cast())?;
    let mut out = [0u32; N];
    out.copy_from_slice(&buf[1..]);
    Ok(out)
}

/// Sets the words of a command read with [`words`].
pub fn set_words<const N: usize>(ifname: &str, cmd: u32, values: &[u32; N]) -> io::Result<()> {
    let mut buf = vec![0u32; N + 1];
    buf[0] = cmd;
    buf[1..].copy_from_slice(values);
    call(ifname, buf.as_mut_ptr().cast())
}

/// `struct ethtool_drvinfo`: driver, version, firmware-version, bus-info.
pub fn drvinfo(ifname: &str) -> io::Result<[String; 4]> {
    // cmd, driver[32], version[32], fw_version[32], bus_info[32],
    // erom_version[32], reserved2[12], five u32 counts.
    let mut buf = [0u8; 4 + 32 * 5 + 12 + 5 * 4];
    buf[..4].copy_from_slice(&GDRVINFO.to_ne_bytes());
    call(ifname, buf.as_mut_ptr().cast())?;
    let text = |i: usize| {
        let s = &buf[4 + 32 * i..4 + 32 * (i + 1)];
        let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
        String::from_utf8_lossy(&s[..end]).into_owned()
    };
    Ok([text(0), text(1), text(2), text(3)])
}

/// `ETHTOOL_GPERMADDR` (`ethtool -P`): the address the device was made
/// with (`dev->perm_addr`), which a bond, a cloned MAC or a VLAN leaves
/// alone; `None` when the driver set none (all zero: virtual devices).
pub fn perm_addr(ifname: &str) -> io::Result<Option<Vec<u8>>> {
    // struct ethtool_perm_addr: cmd, size, then `size` bytes (MAX_ADDR_LEN 32).
    let mut buf = [0u8; 8 + 32];
    buf[..4].copy_from_slice(&GPERMADDR.to_ne_bytes());
    buf[4..8].copy_from_slice(&32u32.to_ne_bytes());
    call(ifname, buf.as_mut_ptr().cast())?;
    let size = u32::from_ne_bytes(buf[4..8].try_into().expect("4 bytes")) as usize;
    let addr = &buf[8..8 + size.min(32)];
    Ok((!addr.iter().all(|&b| b == 0)).then(|| addr.to_vec()))
}

/// One feature bit: available (changeable), requested, active, never changed.
#[derive(Clone, Copy, Debug)]
pub struct Bit {
    pub available: bool,
    pub requested: bool,
    pub active: bool,
    pub never_changed: bool,
}

/// Every named feature bit, in the kernel's order (`ETHTOOL_GFEATURES`
/// with the names of `ETH_SS_FEATURES`).
pub fn features(ifname: &str) -> io::Result<Vec<(String, Bit)>> {
    let names = feature_names(ifname)?;
    let blocks = names.len().div_ceil(32);
    // cmd, size, then per block: available, requested, active, never_changed.
    let mut buf = vec![0u32; 2 + 4 * blocks];
    buf[0] = GFEATURES;
    buf[1] = blocks as u32;
    call(ifname, buf.as_mut_ptr().cast())?;
    let bit = |word: usize, i: usize| buf[2 + 4 * (i / 32) + word] & (1 << (i % 32)) != 0;
    Ok(names
        .into_iter()
        .enumerate()
        .map(|(i, n)| {
            let b = Bit {
                available: bit(0, i),
                requested: bit(1, i),
                active: bit(2, i),
                never_changed: bit(3, i),
            };
            (n, b)
        })
        .collect())
}

/// Requests feature `name` on or off (`ETHTOOL_SFEATURES`).
pub fn set_feature(ifname: &str, name: &str, on: bool) -> io::Result<()> {
    let names = feature_names(ifname)?;
    let i = names.iter().position(|n| n == name).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("{ifname} has no feature {name}"),
        )
    })?;
    let blocks = names.len().div_ceil(32);
    // cmd, size, then per block: valid, requested.
    let mut buf = vec![0u32; 2 + 2 * blocks];
    buf[0] = SFEATURES;
    buf[1] = blocks as u32;
    buf[2 + 2 * (i / 32)] = 1 << (i % 32);
    if on {
        buf[3 + 2 * (i / 32)] = 1 << (i % 32);
    }
    call(ifname, buf.as_mut_ptr().cast())
}

fn feature_names(ifname: &str) -> io::Result<Vec<String>> {
    // struct ethtool_sset_info: cmd, reserved, u64 sset_mask, u32 data[].
    #[repr(C)]
    struct SsetInfo {
        cmd: u32,
        reserved: u32,
        mask: u64,
        data: u32,
    }
    let mut info = SsetInfo {
        cmd: GSSET_INFO,
        reserved: 0,
        mask: 1 << SS_FEATURES,
        data: 0,
    };
    call(ifname, (&mut info as *mut SsetInfo).cast())?;
    let count = if info.mask & (1 << SS_FEATURES) != 0 {
        info.data as usize
    } else {
        0
    };
    // struct ethtool_gstrings: cmd, string_set, len, then len × 32 bytes.
    let mut buf = vec![0u8; 12 + 32 * count];
    buf[..4].copy_from_slice(&GSTRINGS.to_ne_bytes());
    buf[4..8].copy_from_slice(&SS_FEATURES.to_ne_bytes());
    buf[8..12].copy_from_slice(&(count as u32).to_ne_bytes());
    call(ifname, buf.as_mut_ptr().cast())?;
    Ok((0..count)
        .map(|i| {
            let s = &buf[12 + 32 * i..12 + 32 * (i + 1)];
            let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
            String::from_utf8_lossy(&s[..end]).into_owned()
        })
        .collect())
}

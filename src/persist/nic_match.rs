//! How a `.link` file and a udev rule name the device a NIC knob is on:
//! by what stays the device's own at the boot `add` event, never by the
//! current MAC address (a bond's second slave carries the bond's, a
//! NetworkManager cloned MAC replaces it, VLAN children inherit it), nor by
//! a "permanent" one the driver drew at random (VF drivers copy their
//! random address there): a device without either is matched by the name
//! its creator gave it, or refused.

use crate::knob::HostCtx;
use crate::peers::udev::{self, Device};

/// The device `ifname`, its address and names checked.
pub fn device(host: &HostCtx, ifname: &str) -> Result<Device, String> {
    Device::read(host.root, ifname)
}

/// The other interfaces on the same PCI function (ports of one function,
/// switchdev representors), with their `dev_port`.
fn siblings(host: &HostCtx, dev: &Device) -> Vec<(String, Option<String>)> {
    host.list("/sys/class/net")
        .into_iter()
        .filter(|n| *n != dev.name && udev::check_ifname(n).is_ok())
        .filter(|n| {
            let link = host
                .root
                .read_link(&format!("/sys/class/net/{n}"))
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            dev.pci
                .as_ref()
                .is_some_and(|p| link.contains(&format!("/{p}/net/")))
        })
        .map(|n| {
            let port = host.text(&format!("/sys/class/net/{n}/dev_port"));
            (n, port)
        })
        .collect()
}

/// `addr_assign_type` 1: the kernel or driver drew the address at random
/// (include/uapi/linux/netdevice.h NET_ADDR_RANDOM); a re-created device
/// gets another, its "permanent" one too where the driver copies it there.
fn random_mac(host: &HostCtx, dev: &Device) -> bool {
    host.text(&format!("/sys/class/net/{}/addr_assign_type", dev.name))
        .is_some_and(|t| t.trim() == "1")
}

/// `name_assign_type` 3 (NET_NAME_USER): whoever created the device named
/// it (`ip link add NAME`), and names it so again when re-creating it.
fn named_by_creator(host: &HostCtx, dev: &Device) -> bool {
    host.text(&format!("/sys/class/net/{}/name_assign_type", dev.name))
        .is_some_and(|t| t.trim() == "3")
}

/// Why no key holds for a device without a PCI function, and what would.
fn no_key(host: &HostCtx, dev: &Device, what: &str) -> String {
    let mac = if random_mac(host, dev) {
        "its MAC is random (addr_assign_type 1: a new one each time it is created)"
    } else {
        "it has no permanent address (ethtool -P)"
    };
    format!(
        "{}: {mac}, it sits on no PCI device, and the kernel chose its name: {what} by MAC \
         would miss it once it is re-created (or a bond or a cloned MAC changes the address); \
         create it under a name of your own (`ip link add NAME ...`, name_assign_type 3), \
         which hostknob then matches, or persist it on the physical NIC (matched by PCI path)",
        dev.name
    )
}

/// The permanent address, unless the driver drew it at random.
fn permanent<'d>(host: &HostCtx, dev: &'d Device) -> Option<&'d String> {
    dev.permanent_mac
        .as_ref()
        .filter(|_| !random_mac(host, dev))
}

/// The `[Match]` lines of a `.link` file for `dev`, and why that key.
pub fn link_match(host: &HostCtx, dev: &Device) -> Result<(String, String), String> {
    // Type= is DEVTYPE or the ARPHRD name (net-condition.c link_get_type_string):
    // `ether` leaves out the VLAN, bond and bridge devices over this one.
    let kind = format!("Type={}", dev.iftype);
    if let Some(p) = permanent(host, dev) {
        return Ok((
            format!("PermanentMACAddress={p}\n{kind}\n"),
            format!(
                "matched by its permanent address {p} (ethtool -P), which a bond, a cloned MAC \
                 or a VLAN does not change, and {kind}, which leaves out VLAN, bond and bridge \
                 devices"
            ),
        ));
    }
    if let Some(path) = &dev.path {
        let others = siblings(host, dev);
        if others.is_empty() {
            return Ok((
                format!("Path={path}\n{kind}\n"),
                format!(
                    "matched by its PCI path {path} (udev's ID_PATH; no permanent address is \
                     known here: `hostknob capture` stores it), and {kind}, which leaves out \
                     VLAN, bond and bridge devices"
                ),
            ));
        }
        let names: Vec<&str> = others.iter().map(|(n, _)| n.as_str()).collect();
        return Err(format!(
            "{} has no permanent address known here, and its PCI path {path} is also {}'s: \
             a .link file by path would apply to both (`hostknob capture` on the host stores \
             the permanent address)",
            dev.name,
            names.join(", ")
        ));
    }
    if named_by_creator(host, dev) {
        return Ok((
            format!("OriginalName={}\n{kind}\n", dev.name),
            format!(
                "matched by its name {} (OriginalName=), which its creator gave it \
                 (name_assign_type 3), as it sits on no PCI device and has no fixed address",
                dev.name
            ),
        ));
    }
    Err(no_key(host, dev, "a .link file"))
}

/// The match keys of a udev rule for `dev`, and why those.
pub fn rule_match(host: &HostCtx, dev: &Device) -> Result<(String, String), String> {
    let Some(pci) = &dev.pci else {
        if named_by_creator(host, dev) {
            return Ok((
                format!("KERNEL==\"{}\"", dev.name),
                format!(
                    "matched by its name {} (KERNEL==), which its creator gave it \
                     (name_assign_type 3), as it sits on no PCI device",
                    dev.name
                ),
            ));
        }
        return Err(no_key(host, dev, "a udev rule"));
    };
    let mut keys = format!("KERNELS==\"{pci}\"");
    let others = siblings(host, dev);
    let why = if others.is_empty() {
        format!(
            "matched by its PCI function {pci} (KERNELS==), which names the device itself: \
             VLAN, bond and bridge devices over it sit elsewhere"
        )
    } else {
        let port = host.text(&format!("/sys/class/net/{}/dev_port", dev.name));
        let clash = others.iter().any(|(_, p)| p.is_none() || *p == port);
        let Some(port) = port.filter(|p| !clash && p.bytes().all(|b| b.is_ascii_digit())) else {
            let names: Vec<&str> = others.iter().map(|(n, _)| n.as_str()).collect();
            return Err(format!(
                "{} shares its PCI function {pci} with {}, and dev_port does not tell them \
                 apart: a rule would apply to both",
                dev.name,
                names.join(", ")
            ));
        };
        keys += &format!(", ATTR{{dev_port}}==\"{port}\"");
        format!(
            "matched by its PCI function {pci} (KERNELS==) and port {port} (dev_port), which \
             name the device itself"
        )
    };
    Ok((keys, why))
}

//! `doc --check` on the live host a while after `doc`, with nothing configured
//! in between: identical, though processes came and went meanwhile.
//! Read-only (the document goes to a temporary file).

use std::process::Command;
use std::time::Duration;

use crate::support::*;

#[test]
fn a_live_document_is_still_current_moments_later() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.md");
    let p = path.to_str().unwrap();
    let out = hostknob(&["doc", "--out", p]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A process that holds memory and then goes away, as builds and jobs do.
    let mut job = Command::new("sh")
        .args([
            "-c",
            "x=$(head -c 30000000 /dev/zero | tr '\\0' a); sleep 3",
        ])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(4));
    let _ = job.wait();
    let out = hostknob(&["doc", "--check", "--out", p]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "the live document changed:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let text = std::fs::read_to_string(&path).unwrap();
    if std::path::Path::new("/sys/bus/virtio/drivers/virtio_balloon/virtio0").exists() {
        assert!(text.contains("Node memory sizes are left out"), "{text}");
    }
    if text.contains("The largest user-space processes") {
        assert!(text.contains("not compared by `doc --check`"));
    }
}

//! The manifest's revision, so a fleet can tell which review each host
//! audited against: the git commit when the manifest directory is a checkout
//! (read from `.git` with plain file reads, no `git` command), otherwise a
//! SHA-256 over its knob files.

use std::path::{Path, PathBuf};

/// `git:COMMIT` when DIR holds `.git` (a directory, or a worktree's
/// `gitdir:` file) whose `HEAD` resolves to a commit; otherwise
/// `sha256:HASH` over each knob and profile file's path under DIR, length and bytes, in
/// path order. `None` when there is no knob file or one cannot be read.
pub fn of(dir: &Path) -> Option<String> {
    if let Some(commit) = git_head(dir) {
        return Some(format!("git:{commit}"));
    }
    let mut files = super::yaml_files(dir).ok()?;
    if files.is_empty() {
        return None;
    }
    // Profiles are reviewed as knobs are: they are part of the revision.
    files.extend(super::profile::files(dir));
    files.sort();
    let mut data = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(dir).unwrap_or(f);
        let bytes = std::fs::read(f).ok()?;
        data.extend_from_slice(rel.to_string_lossy().as_bytes());
        data.push(0);
        data.extend_from_slice(bytes.len().to_string().as_bytes());
        data.push(0);
        data.extend_from_slice(&bytes);
    }
    Some(format!("sha256:{}", hex(&sha256(&data))))
}

fn is_commit(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn read_small(p: &Path) -> Option<String> {
    use std::io::Read as _;
    let mut s = String::new();
    std::fs::File::open(p)
        .ok()?
        .take(1 << 20)
        .read_to_string(&mut s)
        .ok()?;
    Some(s)
}

/// The commit `HEAD` names in DIR's own `.git` (not a parent's: a manifest
/// inside `/etc` under etckeeper is not a checkout of its own).
fn git_head(dir: &Path) -> Option<String> {
    let dotgit = dir.join(".git");
    let gitdir: PathBuf = if dotgit.is_dir() {
        dotgit
    } else {
        let text = read_small(&dotgit)?;
        let to = text.trim().strip_prefix("gitdir:")?.trim();
        dir.join(to)
    };
    // A linked worktree keeps its HEAD here and shared refs in `commondir`.
    let common = match read_small(&gitdir.join("commondir")) {
        Some(c) => gitdir.join(c.trim()),
        None => gitdir.clone(),
    };
    let head = read_small(&gitdir.join("HEAD"))?;
    let head = head.trim();
    let Some(name) = head.strip_prefix("ref:").map(str::trim) else {
        return is_commit(head).then(|| head.to_ascii_lowercase());
    };
    if name.split('/').any(|c| c == ".." || c.is_empty()) {
        return None;
    }
    for base in [&gitdir, &common] {
        if let Some(v) = read_small(&base.join(name)) {
            let v = v.trim();
            return is_commit(v).then(|| v.to_ascii_lowercase());
        }
    }
    let packed = read_small(&common.join("packed-refs"))?;
    packed.lines().find_map(|l| {
        let (commit, r) = l.split_once(' ')?;
        (r == name && is_commit(commit)).then(|| commit.to_ascii_lowercase())
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 (FIPS 180-4), for a manifest of a few hundred kB at most.
fn sha256(data: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 64];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let mut v = h;
        for i in 0..64 {
            let [a, b, c, d, e, f, g, hh] = v;
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            v = [t1.wrapping_add(t2), a, b, c, d.wrapping_add(t1), e, f, g];
        }
        for (x, y) in h.iter_mut().zip(v) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 32];
    for (i, x) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&x.to_be_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_matches_the_standard_vectors() {
        assert_eq!(
            hex(&sha256(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            hex(&sha256(b"")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        // Two blocks of padding.
        let long = b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
        assert_eq!(
            hex(&sha256(long)),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
    }
}

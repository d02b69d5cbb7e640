use super::*;
use std::os::unix::fs::symlink;

fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let top = tempfile::tempdir().unwrap();
    let root = top.path().join("root");
    let outside = top.path().join("elsewhere");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "outside").unwrap();
    (top, root, outside)
}

#[test]
fn a_symlink_out_is_neither_read_nor_written() {
    let (_top, root, outside) = setup();
    symlink(&outside, root.join("link")).unwrap();
    let c = Confined::open(&root).unwrap();
    let e = c.read(Path::new("link/secret.txt")).unwrap_err();
    assert_eq!(e.kind(), ConfineErrorKind::Escape, "{e}");
    assert!(e.to_string().contains("outside the server's root"), "{e}");
    let e = c
        .write_atomic(Path::new("link/new.txt"), ".new.tmp", b"x", 0o644, || {})
        .unwrap_err();
    assert_eq!(e.kind(), ConfineErrorKind::Escape, "{e}");
    assert!(!outside.join("new.txt").exists());
    assert!(c.sub(Path::new("link")).is_err());
    assert!(c.read_dir_names(Path::new("link")).is_err());
    // `..` and absolute paths elsewhere, before any resolution.
    for p in ["../elsewhere/secret.txt", "/etc/hostname"] {
        assert_eq!(
            c.read(Path::new(p)).unwrap_err().kind(),
            ConfineErrorKind::Escape,
            "{p}"
        );
    }
    // A link that stays beneath the root is followed.
    std::fs::create_dir(root.join("real")).unwrap();
    std::fs::write(root.join("real/f"), "in").unwrap();
    symlink("real", root.join("inner")).unwrap();
    assert_eq!(c.read(Path::new("inner/f")).unwrap(), b"in");
    assert_eq!(c.read(&root.join("real/f")).unwrap(), b"in");
}

#[test]
fn a_new_folder_is_never_a_symlink_someone_placed() {
    let (_top, root, outside) = setup();
    let c = Confined::open(&root).unwrap();
    symlink(&outside, root.join("r001")).unwrap();
    let e = c.create_dir_new(Path::new("r001")).unwrap_err();
    assert_eq!(e.kind(), ConfineErrorKind::Exists, "{e}");
    symlink(outside.join("secret.txt"), root.join("out.txt")).unwrap();
    assert!(c.create_new(Path::new("out.txt"), 0o644).is_err());
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "outside"
    );
    c.create_dir_new(Path::new("r002")).unwrap();
    assert!(c.is_dir(Path::new("r002")));
}

#[test]
fn an_atomic_write_keeps_its_mode_and_replaces_the_file() {
    let (_top, root, _outside) = setup();
    let c = Confined::open(&root).unwrap();
    c.create_dir_all(Path::new("a/b")).unwrap();
    c.write_atomic(Path::new("a/b/f"), ".f.tmp", b"one", 0o600, || {})
        .unwrap();
    c.write_atomic(Path::new("a/b/f"), ".f.tmp", b"two", 0o640, || {})
        .unwrap();
    assert_eq!(c.read_to_string(Path::new("a/b/f")).unwrap(), "two");
    assert_eq!(c.mode_and_links(Path::new("a/b/f")).unwrap(), (0o640, 1));
    assert_eq!(c.read_dir_names(Path::new("a/b")).unwrap(), vec!["f"]);
}

/// A thread flips `sub` between a real folder and a symlink out while we write through it:
/// no write may ever land outside.
#[test]
fn a_folder_flipped_to_a_symlink_in_a_loop_never_leads_out() {
    let (_top, root, outside) = setup();
    std::fs::write(outside.join("s.py"), "outside\n").unwrap();
    let c = Confined::open(&root).unwrap();
    std::fs::create_dir(root.join("sub")).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flipper = {
        let (root, outside, stop) = (root.clone(), outside.clone(), stop.clone());
        std::thread::spawn(move || {
            let (sub, real) = (root.join("sub"), root.join("sub_real"));
            let mut flips = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = std::fs::rename(&sub, &real);
                let _ = symlink(&outside, &sub);
                let _ = std::fs::remove_file(&sub);
                let _ = std::fs::rename(&real, &sub);
                flips += 1;
            }
            flips
        })
    };
    let mut landed = 0;
    for i in 0..2000 {
        if c.write_atomic(
            Path::new("sub/s.py"),
            ".s.tmp",
            format!("{i}\n").as_bytes(),
            0o644,
            || {},
        )
        .is_ok()
        {
            landed += 1;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let flips = flipper.join().unwrap();
    assert!(flips > 0, "the flipper never ran");
    assert_eq!(
        std::fs::read_to_string(outside.join("s.py")).unwrap(),
        "outside\n",
        "a write went through the symlink ({landed} writes landed, {flips} flips)"
    );
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        2,
        "nothing new appeared outside"
    );
}

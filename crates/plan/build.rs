//! Embed every `recipes/*.toml` of the repository, so adding a framework means adding a file.

use std::fs;
use std::path::Path;

fn main() {
    // Read at run time, not baked in with env!: a build script binary reused from another
    // checkout (a shared target dir) would otherwise look in that checkout.
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let dir = Path::new(&manifest_dir).join("../../recipes");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<_> = fs::read_dir(&dir)
        .expect("recipes/ beside crates/")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let mut out = String::from("/// `(file name, text)` of every recipe, sorted by name.\npub const EMBEDDED: &[(&str, &str)] = &[\n");
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        let name = f.file_name().unwrap().to_string_lossy();
        let abs = f.canonicalize().unwrap();
        out.push_str(&format!(
            "    ({name:?}, include_str!({:?})),\n",
            abs.display().to_string()
        ));
    }
    out.push_str("];\n");
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("recipes.rs");
    fs::write(dest, out).unwrap();
}

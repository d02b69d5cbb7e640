//! Which files are the program's own code and which a library's: one test for every reader
//! (the stacks' call sites, memray's sites, the report's rules).

/// Code the program's author did not write: an installed package, the standard library
/// (`…/lib/python3.11/…`), a frozen or generated module (`<frozen runpy>`, `<string>`), or
/// native code (a frame without a file, a shared object, a C or C++ source as debug
/// information names it). Decided on the path alone, so it needs no root.
pub fn library_file(file: Option<&str>) -> bool {
    let Some(file) = file else {
        return true;
    };
    file.starts_with('<')
        || native_file(file)
        || file.contains("/site-packages/")
        || file.contains("/dist-packages/")
        || standard_library(file)
        || entry_point_script(file)
}

/// An installed command's wrapper (`.venv/bin/gunicorn`, `/usr/bin/black`): pip writes it,
/// it only calls the package.
fn entry_point_script(file: &str) -> bool {
    let path = std::path::Path::new(file);
    path.extension().is_none()
        && path
            .parent()
            .and_then(|p| p.file_name())
            .is_some_and(|d| d == "bin")
}

/// Native code as `py-spy --native` and memray `--native` name it: a shared object
/// (`libz.so.1.2.13`, `_json.cpython-311-x86_64-linux-gnu.so`) or a compiled language's
/// source (`Objects/bytesobject.c`, `zlibmodule.c.h`). Counted as a library's even where the
/// program's author wrote it: debug information names sources relative to wherever they were
/// built, so a path cannot tell an extension of the program's from CPython's, and the
/// program's Python line that calls it is the place the report can name.
pub fn native_file(file: &str) -> bool {
    const SOURCES: &[&str] = &[
        ".c", ".h", ".cc", ".cpp", ".cxx", ".hh", ".hpp", ".hxx", ".inc", ".cu", ".cuh", ".rs",
        ".S", ".s",
    ];
    let name = file.rsplit('/').next().unwrap_or(file);
    let shared_object = name.ends_with(".so") || name.contains(".so.") || name.ends_with(".dylib");
    shared_object || SOURCES.iter().any(|ext| name.ends_with(ext))
}

/// `…/lib/python3.11/…` (or `pypy3.10`): the interpreter's own library folder.
fn standard_library(file: &str) -> bool {
    file.match_indices("/lib/py").any(|(at, _)| {
        let rest = &file[at + "/lib/".len()..];
        let name_end = rest.find('/').unwrap_or(rest.len());
        let name = &rest[..name_end];
        let version = name
            .strip_prefix("python")
            .or_else(|| name.strip_prefix("pypy"));
        name_end < rest.len()
            && version
                .is_some_and(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || c == '.'))
    })
}

/// Whether a file a profiler names is the program's own code, for a program run in `cwd`:
/// under it (or relative, as a script run by a relative path is named) and not a library's
/// (a virtual environment or a command's wrapper under `cwd` is still a library).
pub fn is_program_file(file: &str, cwd: &std::path::Path) -> bool {
    let path = std::path::Path::new(file);
    (path.starts_with(cwd) || path.is_relative()) && !library_file(Some(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_files_are_packages_the_standard_library_and_frozen_modules() {
        for f in [
            "/usr/lib/python3.11/json/decoder.py",
            "/root/.pyenv/versions/3.11.9/lib/python3.11/threading.py",
            "/w/.venv/lib/python3.11/site-packages/torch/autograd/graph.py",
            "/usr/lib/python3/dist-packages/yaml/__init__.py",
            "/opt/pypy/lib/pypy3.10/json/encoder.py",
            "<frozen runpy>",
            "/w/.venv/bin/gunicorn",
            "libz.so.1.2.13",
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
            "/w/.venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so",
            "_json.cpython-311-x86_64-linux-gnu.so",
            "Objects/bytesobject.c",
            "zlibmodule.c.h",
            "/build/src/kernel.cu",
        ] {
            assert!(library_file(Some(f)), "{f}");
        }
        for f in [
            "train.py",
            "/home/me/lib/python_tools/x.py",
            "/home/me/lib/python3.11",
            "/srv/app/library.py",
            "/srv/app/solver.pyx.py",
            "/srv/app/social.py",
        ] {
            assert!(!library_file(Some(f)), "{f}");
        }
        assert!(library_file(None));
    }

    #[test]
    fn program_files_are_under_the_folder_and_not_a_library() {
        let cwd = std::path::Path::new("/w");
        assert!(is_program_file("/w/train.py", cwd));
        assert!(is_program_file("train.py", cwd));
        assert!(!is_program_file("/elsewhere/train.py", cwd));
        assert!(!is_program_file("<frozen runpy>", cwd));
        assert!(!is_program_file(
            "/w/.venv/lib/python3.11/site-packages/torch/nn/functional.py",
            cwd
        ));
        assert!(!is_program_file("/w/.venv/bin/gunicorn", cwd));
    }
}

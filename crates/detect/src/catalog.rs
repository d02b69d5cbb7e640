//! Every tool `detect_tools` checks, as data: id, category, how it is found, how to install it.
//! The order here is the order of the report.

use system_profile_model::detect::{ToolCategory, ToolKind};

/// How a tool is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Locate {
    /// A program: looked up on PATH (and beside the target's Python), then asked its version.
    Program {
        program: &'static str,
        version_args: &'static [&'static str],
    },
    /// A module imported by the target's Python; `dist` is its distribution name for the version.
    PythonModule {
        module: &'static str,
        dist: Option<&'static str>,
    },
    /// Known through another probe (NVML, NCCL and torch.profiler through torch).
    Derived,
}

#[derive(Debug, Clone, Copy)]
pub struct ToolSpec {
    pub id: &'static str,
    pub name: &'static str,
    pub category: ToolCategory,
    pub locate: Locate,
    pub install_hint: &'static str,
}

impl ToolSpec {
    pub fn kind(&self) -> ToolKind {
        match self.locate {
            Locate::Program { .. } => ToolKind::Executable,
            Locate::PythonModule { .. } => ToolKind::PythonModule,
            Locate::Derived => ToolKind::Library,
        }
    }
}

const V: &[&str] = &["--version"];

macro_rules! program {
    ($id:literal, $name:literal, $cat:ident, $prog:literal, $args:expr, $hint:literal) => {
        ToolSpec {
            id: $id,
            name: $name,
            category: ToolCategory::$cat,
            locate: Locate::Program {
                program: $prog,
                version_args: $args,
            },
            install_hint: $hint,
        }
    };
}

macro_rules! module {
    ($id:literal, $name:literal, $cat:ident, $module:literal, $dist:expr, $hint:literal) => {
        ToolSpec {
            id: $id,
            name: $name,
            category: ToolCategory::$cat,
            locate: Locate::PythonModule {
                module: $module,
                dist: $dist,
            },
            install_hint: $hint,
        }
    };
}

const CATALOG: &[ToolSpec] = &[
    // CPU
    module!("cprofile", "cProfile", Cpu, "cProfile", None, "part of CPython's standard library; use a full CPython build"),
    program!("py_spy", "py-spy", Cpu, "py-spy", V, "pip install py-spy"),
    module!("line_profiler", "line_profiler", Cpu, "line_profiler", Some("line_profiler"), "pip install line_profiler"),
    module!("pyinstrument", "pyinstrument", Cpu, "pyinstrument", Some("pyinstrument"), "pip install pyinstrument"),
    module!("scalene", "Scalene", Cpu, "scalene", Some("scalene"), "pip install scalene"),
    program!("perf", "perf", Cpu, "perf", &["version"], "apt-get install linux-perf (Debian) or linux-tools-$(uname -r) (Ubuntu)"),
    program!("time", "/usr/bin/time -v", Cpu, "/usr/bin/time", V, "apt-get install time"),
    program!("valgrind", "Valgrind (callgrind)", Cpu, "valgrind", V, "apt-get install valgrind"),
    program!("hyperfine", "hyperfine", Benchmark, "hyperfine", V, "apt-get install hyperfine"),
    // Memory
    module!("tracemalloc", "tracemalloc", Memory, "tracemalloc", None, "part of CPython's standard library; use a full CPython build"),
    module!("memory_profiler", "memory_profiler", Memory, "memory_profiler", Some("memory_profiler"), "pip install memory_profiler"),
    module!("memray", "memray", Memory, "memray", Some("memray"), "pip install memray"),
    program!("cc", "C compiler (cc), for the allocation sampler", Memory, "cc", V, "apt-get install gcc (the allocation sampler is built for the target's interpreter, which needs its headers: python3-dev, or any pyenv or python.org build)"),
    program!("heaptrack", "heaptrack", Memory, "heaptrack", V, "apt-get install heaptrack"),
    // GPU
    program!("nvidia_smi", "nvidia-smi", Gpu, "nvidia-smi", &["--version"], "install the NVIDIA driver (nvidia-smi ships with it)"),
    program!("nvidia_smi_dmon", "nvidia-smi dmon", Gpu, "nvidia-smi", &["--version"], "install the NVIDIA driver (nvidia-smi ships with it)"),
    ToolSpec { id: "nvml", name: "NVML (libnvidia-ml)", category: ToolCategory::Gpu, locate: Locate::Derived, install_hint: "install the NVIDIA driver; libnvidia-ml.so.1 ships with it (in containers: --gpus all / the NVIDIA container toolkit)" },
    program!("nvitop", "nvitop", Gpu, "nvitop", V, "pip install nvitop"),
    ToolSpec { id: "torch_profiler", name: "torch.profiler", category: ToolCategory::Gpu, locate: Locate::Derived, install_hint: "pip install torch (into the target's environment)" },
    program!("nsys", "Nsight Systems (nsys)", Gpu, "nsys", &["--version"], "install Nsight Systems from the CUDA toolkit (cuda-nsight-systems) "),
    program!("ncu", "Nsight Compute (ncu)", Gpu, "ncu", &["--version"], "install Nsight Compute from the CUDA toolkit (cuda-nsight-compute)"),
    program!("dcgmi", "DCGM (dcgmi)", Gpu, "dcgmi", &["--version"], "install datacenter-gpu-manager and start nv-hostengine"),
    // Interconnect
    program!("nvidia_smi_topo", "nvidia-smi topo -m", Interconnect, "nvidia-smi", &["--version"], "install the NVIDIA driver (nvidia-smi ships with it)"),
    program!("nvidia_smi_nvlink", "nvidia-smi nvlink", Interconnect, "nvidia-smi", &["--version"], "install the NVIDIA driver (nvidia-smi ships with it)"),
    ToolSpec { id: "nccl", name: "NCCL (NCCL_DEBUG=INFO)", category: ToolCategory::Interconnect, locate: Locate::Derived, install_hint: "pip install torch with CUDA (it carries NCCL) on a machine with NVIDIA GPUs" },
    // System
    program!("strace", "strace -c", System, "strace", &["-V"], "apt-get install strace"),
    program!("ltrace", "ltrace", System, "ltrace", &["-V"], "apt-get install ltrace"),
    program!("iostat", "iostat", System, "iostat", &["-V"], "apt-get install sysstat"),
    program!("vmstat", "vmstat", System, "vmstat", &["-V"], "apt-get install procps"),
    program!("pidstat", "pidstat", System, "pidstat", &["-V"], "apt-get install sysstat"),
    program!("mpstat", "mpstat", System, "mpstat", &["-V"], "apt-get install sysstat"),
    program!("bpftrace", "bpftrace", System, "bpftrace", &["--version"], "apt-get install bpftrace"),
    // Cluster engines
    program!("srun", "Slurm (srun)", System, "srun", &["--version"], "run the server on a node or login node of the Slurm cluster (apt-get install slurm-client, with the cluster's slurm.conf and munge key)"),
];

/// Every tool `detect_tools` checks, in report order.
pub fn catalog() -> &'static [ToolSpec] {
    CATALOG
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_unique_and_snake_case() {
        let mut ids: Vec<_> = super::catalog().iter().map(|t| t.id).collect();
        assert!(ids
            .iter()
            .all(|id| id.chars().all(|c| c.is_ascii_lowercase() || c == '_')));
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n);
    }

    #[test]
    fn covers_every_tool_the_seed_names() {
        let ids: Vec<_> = super::catalog().iter().map(|t| t.id).collect();
        for needed in [
            "cprofile",
            "py_spy",
            "line_profiler",
            "perf",
            "time",
            "tracemalloc",
            "memory_profiler",
            "memray",
            "nvidia_smi",
            "nvidia_smi_dmon",
            "nvitop",
            "torch_profiler",
            "nsys",
            "nvidia_smi_topo",
            "nvidia_smi_nvlink",
            "nccl",
            "strace",
            "iostat",
            "vmstat",
            "scalene",
            "pyinstrument",
            "pidstat",
            "mpstat",
            "ltrace",
            "bpftrace",
            "valgrind",
            "heaptrack",
            "hyperfine",
            "ncu",
            "dcgmi",
        ] {
            assert!(ids.contains(&needed), "{needed} missing from the catalog");
        }
    }
}

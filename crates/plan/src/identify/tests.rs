//! Identification decided on a machine made of plain data (`Fake`): nothing here touches this
//! machine's files, processes or interpreter, so each case states its whole world.

use super::*;
use crate::pyhelper::HelperError;
use machine::Pending;
use machine::{ClusterError, ClusterErrorKind, ClusterJob, QueueRow};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use system_profile_model::target::{JobStep, SystemdUnit};

#[derive(Default)]
struct Fake {
    /// Path → (text, executable).
    files: BTreeMap<PathBuf, (String, bool)>,
    dirs: BTreeSet<PathBuf>,
    on_path: BTreeMap<String, PathBuf>,
    uid: u32,
    processes: Vec<ProcessSnapshot>,
    listening: BTreeMap<u16, Vec<u64>>,
    sockets: BTreeMap<u32, Vec<u64>>,
    /// Module → the file it resolves to.
    modules: BTreeMap<String, String>,
    /// Slurm's jobs (none: no Slurm client here).
    slurm: Option<Vec<ClusterJob>>,
}

impl Fake {
    fn file(mut self, path: &str, text: &str) -> Self {
        let path = PathBuf::from(path);
        for dir in path.ancestors().skip(1) {
            self.dirs.insert(dir.to_path_buf());
        }
        self.files.insert(path, (text.to_string(), false));
        self
    }

    fn process(mut self, pid: u32, ppid: u32, uid: u32, argv: &[&str]) -> Self {
        self.processes.push(ProcessSnapshot {
            pid,
            ppid,
            uid,
            comm: argv[0].rsplit('/').next().unwrap_or(argv[0]).to_string(),
            state: 'S',
            cmdline: argv.iter().map(|a| a.to_string()).collect(),
            ..Default::default()
        });
        self
    }
}

impl Machine for Fake {
    fn kind(&self, path: &Path) -> FileKind {
        if let Some((text, executable)) = self.files.get(path) {
            FileKind::File {
                executable: *executable,
                bytes: text.len() as u64,
            }
        } else if self.dirs.contains(path) {
            FileKind::Dir
        } else {
            FileKind::Missing
        }
    }

    fn read_head(&self, path: &Path, max_bytes: usize) -> Option<Vec<u8>> {
        let text = &self.files.get(path)?.0;
        Some(text.as_bytes()[..text.len().min(max_bytes)].to_vec())
    }

    fn list_dir(&self, dir: &Path) -> Vec<(String, FileKind)> {
        let children = self.files.keys().chain(self.dirs.iter());
        children
            .filter(|p| p.parent() == Some(dir))
            .map(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                (name, self.kind(p))
            })
            .collect()
    }

    fn which(&self, program: &str) -> Option<PathBuf> {
        self.on_path.get(program).cloned()
    }

    fn home(&self) -> Option<String> {
        Some("/home/u".into())
    }

    fn uid(&self) -> u32 {
        self.uid
    }

    fn processes(&self) -> Table {
        Table::of(self.processes.clone(), HashMap::new())
    }

    fn exe(&self, _pid: u32) -> Option<PathBuf> {
        None
    }

    fn cwd_of(&self, _pid: u32) -> Option<PathBuf> {
        None
    }

    fn mapped_files(&self, _pid: u32) -> Vec<PathBuf> {
        Vec::new()
    }

    fn environ(&self, _pid: u32) -> HashMap<String, String> {
        HashMap::new()
    }

    fn listening_inodes(&self, port: u16) -> Vec<u64> {
        self.listening.get(&port).cloned().unwrap_or_default()
    }

    fn socket_inodes(&self, pid: u32) -> Vec<u64> {
        self.sockets.get(&pid).cloned().unwrap_or_default()
    }

    fn systemd_unit<'a>(
        &'a self,
        _name: &'a str,
    ) -> Pending<'a, Result<Option<SystemdUnit>, String>> {
        Box::pin(async { Err("no systemd on this machine".to_string()) })
    }

    fn slurm_job<'a>(&'a self, job_id: &'a str) -> Pending<'a, Result<ClusterJob, ClusterError>> {
        let found = match &self.slurm {
            None => Err(ClusterError {
                kind: ClusterErrorKind::NoEngine,
                message: "scontrol is not on PATH".into(),
            }),
            Some(jobs) => jobs
                .iter()
                .find(|j| j.job_id == job_id)
                .cloned()
                .ok_or(ClusterError {
                    kind: ClusterErrorKind::NoSuchJob,
                    message: format!("Slurm knows no job {job_id}"),
                }),
        };
        Box::pin(async move { found })
    }

    fn slurm_queue(&self) -> Pending<'_, Result<Vec<QueueRow>, ClusterError>> {
        let rows = self
            .slurm
            .iter()
            .flatten()
            .map(|j| QueueRow {
                job_id: j.job_id.clone(),
                name: j.name.clone().unwrap_or_default(),
                user: j.user.clone().unwrap_or_default(),
                state: j.state.clone(),
                node_list: j.node_list.clone().unwrap_or_default(),
            })
            .collect();
        Box::pin(async move { Ok(rows) })
    }

    fn user_name(&self) -> Option<String> {
        Some("u".into())
    }

    fn ray_job<'a>(&'a self, job: &'a str) -> Pending<'a, Result<ClusterJob, ClusterError>> {
        let found = self
            .slurm
            .iter()
            .flatten()
            .find(|j| j.engine == "ray" && (job.is_empty() || j.job_id == job))
            .cloned()
            .ok_or(ClusterError {
                kind: ClusterErrorKind::NoEngine,
                message: "ray is not on PATH".into(),
            });
        Box::pin(async move { found })
    }

    fn ask_python<'a>(
        &'a self,
        python: &'a str,
        _cwd: &'a Path,
        questions: &'a Questions,
        _timeout: Duration,
    ) -> Pending<'a, Result<Answers, HelperError>> {
        let answers = Answers {
            executable: python.to_string(),
            version: "3.11.9".into(),
            outlines: questions
                .outline
                .iter()
                .filter(|f| self.files.contains_key(Path::new(f.as_str())))
                .map(|f| {
                    let text = &self.files[Path::new(f.as_str())].0;
                    let outline = PythonOutline {
                        lines: text.lines().count() as u32,
                        has_main_guard: text.contains("__main__"),
                        ..Default::default()
                    };
                    (f.clone(), outline)
                })
                .collect(),
            specs: questions
                .find_spec
                .iter()
                .map(|m| (m.clone(), self.modules.get(m).cloned()))
                .collect(),
            versions: BTreeMap::new(),
        };
        Box::pin(async move { Ok(answers) })
    }
}

fn options() -> IdentifyOptions {
    IdentifyOptions {
        cwd: PathBuf::from("/work/proj"),
        python: None,
        default_python: "python3".into(),
        helper_timeout: Duration::from_secs(1),
    }
}

async fn identify_in(machine: &Fake, arguments: &str) -> Target {
    identify_on(machine, arguments, &options(), Recipes::builtin()).await
}

#[tokio::test]
async fn a_script_beside_a_venv_runs_with_the_venvs_python() {
    let machine = Fake::default()
        .file(
            "/work/proj/train.py",
            "print('hi')\nif __name__ == '__main__': pass\n",
        )
        .file("/work/proj/.venv/bin/python", "");
    let t = identify_in(&machine, "train.py --epochs 2 memory").await;
    assert_eq!(t.kind, TargetKind::PythonScript, "{:?}", t.questions);
    assert!(!t.needs_clarification, "{:?}", t.questions);
    assert_eq!(
        t.command.as_deref(),
        Some(
            &[
                "/work/proj/.venv/bin/python".to_string(),
                "/work/proj/train.py".into(),
                "--epochs".into(),
                "2".into(),
            ][..]
        )
    );
    assert_eq!(t.focus, vec![Focus::Memory]);
    let outline = t
        .script
        .and_then(|s| s.outline)
        .expect("the file was outlined");
    assert_eq!((outline.lines, outline.has_main_guard), (2, true));
}

#[tokio::test]
async fn a_misspelt_script_is_a_question_naming_the_close_file() {
    let machine = Fake::default().file("/work/proj/train.py", "");
    let t = identify_in(&machine, "trian.py").await;
    assert!(t.needs_clarification);
    assert!(
        t.questions
            .iter()
            .any(|q| q.contains("Did you mean train.py")),
        "{:?}",
        t.questions
    );
}

#[tokio::test]
async fn a_port_names_the_server_that_listens_not_its_workers() {
    let mut machine = Fake::default()
        .process(
            4121,
            1,
            1000,
            &["/usr/bin/python3", "-m", "uvicorn", "app:app"],
        )
        .process(
            4122,
            4121,
            1000,
            &["/usr/bin/python3", "-m", "uvicorn", "app:app"],
        );
    machine.listening.insert(8000, vec![77]);
    // A pre-fork server's worker holds the same socket as its parent.
    machine.sockets.insert(4121, vec![77]);
    machine.sockets.insert(4122, vec![77]);
    let t = identify_in(&machine, "http://localhost:8000/v1").await;
    assert!(
        t.evidence
            .iter()
            .any(|e| e == "port 8000 is listened on by PID 4121"),
        "{:?}",
        t.evidence
    );
    assert_eq!(t.processes.first().map(|p| p.pid), Some(4121));
    let t = identify_in(&machine, "port 9000").await;
    assert!(
        t.questions
            .iter()
            .any(|q| q.contains("Nothing on this machine listens on port 9000")),
        "{:?}",
        t.questions
    );
}

/// The uid bug of the first wave: the server looked itself up in a table it had removed
/// itself from, so no process was ever offered. The user's own Python processes are offered,
/// nobody else's.
#[tokio::test]
async fn nothing_named_offers_the_users_own_python_processes() {
    let mut machine = Fake::default()
        .file("/work/proj/a.py", "")
        .process(10, 1, 1000, &["python3", "mine.py"])
        .process(11, 1, 0, &["python3", "roots.py"])
        .process(13, 1, 1001, &["/usr/bin/python3.11", "theirs.py"]);
    machine.uid = 1000;
    let t = identify_in(&machine, "").await;
    let q = t.questions.join(" ");
    assert!(q.contains("Python files here: a.py."), "{q}");
    assert!(
        q.contains("Running Python processes: 10 (`python3 mine.py`)."),
        "{q}"
    );
    assert!(!q.contains("roots.py") && !q.contains("theirs.py"), "{q}");
}

#[tokio::test]
async fn a_module_not_importable_is_asked_about_and_an_importable_one_resolves() {
    let mut machine = Fake::default();
    machine
        .modules
        .insert("pkg.cli".into(), "/work/proj/pkg/cli.py".into());
    let t = identify_in(&machine, "-m pkg.cli serve").await;
    assert_eq!(t.kind, TargetKind::PythonModule);
    assert!(!t.needs_clarification, "{:?}", t.questions);
    assert_eq!(
        t.module.as_ref().and_then(|m| m.origin.as_deref()),
        Some("/work/proj/pkg/cli.py")
    );
    let t = identify_in(&machine, "-m nowhere").await;
    assert!(t.needs_clarification);
    assert!(
        t.questions[0].contains("Module `nowhere` is not importable"),
        "{:?}",
        t.questions
    );
}

fn job(id: &str, name: &str, user: &str, state: &str) -> ClusterJob {
    ClusterJob {
        engine: "slurm".into(),
        job_id: id.into(),
        name: Some(name.into()),
        user: Some(user.into()),
        state: state.into(),
        node_list: Some("gpu[01-02]".into()),
        nodes: vec!["gpu01".into(), "gpu02".into()],
        steps: vec![
            JobStep {
                step_id: format!("{id}.0"),
                name: "train".into(),
                node_list: "gpu[01-02]".into(),
                tasks: Some(2),
            },
            JobStep {
                step_id: format!("{id}.batch"),
                name: "batch".into(),
                node_list: "gpu01".into(),
                tasks: Some(1),
            },
        ],
        ..Default::default()
    }
}

#[tokio::test]
async fn a_slurm_job_by_id_step_name_or_as_mine() {
    let mut machine = Fake {
        slurm: Some(vec![
            job("7", "train-ddp", "u", "RUNNING"),
            job("8", "eval", "other", "RUNNING"),
            job("9", "later", "u", "PENDING"),
        ]),
        ..Fake::default()
    };
    for words in [
        "slurm job 7 cpu",
        "slurm 7.0",
        "slurm job train-ddp",
        "my slurm job",
    ] {
        let t = identify_in(&machine, words).await;
        assert_eq!(t.kind, TargetKind::ClusterJob, "{words}: {:?}", t.questions);
        assert!(!t.needs_clarification, "{words}: {:?}", t.questions);
        let cluster = t.cluster.as_ref().unwrap();
        assert_eq!(cluster.job_id, "7", "{words}");
        assert_eq!(cluster.nodes, vec!["gpu01", "gpu02"]);
        assert!(
            t.summary.contains("on 2 node(s): gpu01, gpu02"),
            "{}",
            t.summary
        );
    }
    assert_eq!(
        identify_in(&machine, "slurm job 7 cpu").await.focus,
        vec![Focus::Cpu]
    );
    // A step named is kept (only its processes are observed), and checked against the steps
    // Slurm lists; the job's steps are evidence either way.
    let step = identify_in(&machine, "slurm 7.0").await;
    assert_eq!(step.cluster.as_ref().unwrap().step.as_deref(), Some("7.0"));
    assert_eq!(step.cluster.as_ref().unwrap().selector(), "7.0");
    assert!(step.summary.contains("step 7.0 only"), "{}", step.summary);
    assert!(
        step.evidence
            .iter()
            .any(|e| e.contains("7.0 `train` (2 tasks on gpu[01-02]), 7.batch `batch`")),
        "{:?}",
        step.evidence
    );
    let whole = identify_in(&machine, "slurm job 7").await;
    assert_eq!(whole.cluster.as_ref().unwrap().selector(), "7");
    let no_step = identify_in(&machine, "slurm 7.3").await;
    assert!(
        no_step.questions[0].contains("has no running step 7.3: its steps are 7.0"),
        "{:?}",
        no_step.questions
    );
    let pending = identify_in(&machine, "slurm job 9").await;
    assert!(pending.needs_clarification);
    assert!(
        pending.questions[0].contains("is PENDING"),
        "{:?}",
        pending.questions
    );
    let unknown = identify_in(&machine, "slurm job 1234").await;
    assert!(
        unknown.questions[0].contains("Slurm knows no job 1234"),
        "{:?}",
        unknown.questions
    );
    machine
        .slurm
        .as_mut()
        .unwrap()
        .push(job("10", "second", "u", "RUNNING"));
    let two = identify_in(&machine, "my slurm job").await;
    assert!(
        two.questions[0].starts_with("Several Slurm jobs match: 7"),
        "{:?}",
        two.questions
    );
    machine.slurm = None;
    let none = identify_in(&machine, "slurm job 7").await;
    assert!(
        none.questions[0].contains("not on PATH"),
        "{:?}",
        none.questions
    );
}

/// `ray` alone is the Ray cluster when Ray has actors on two nodes or more, and the Ray
/// framework on this machine otherwise; the same for vLLM, which its recipe says runs on Ray.
#[tokio::test]
async fn ray_named_alone_is_the_cluster_only_when_it_spans_nodes() {
    let ray = |nodes: &[&str]| ClusterJob {
        engine: "ray".into(),
        job_id: String::new(),
        state: "RUNNING".into(),
        nodes: nodes.iter().map(|n| n.to_string()).collect(),
        num_tasks: Some(nodes.len() as u32),
        ..Default::default()
    };
    let two = Fake {
        slurm: Some(vec![ray(&["head-45af350b", "node-a69e0d2b"])]),
        ..Fake::default()
    };
    for words in ["ray", "vllm serving"] {
        let t = identify_in(&two, words).await;
        assert_eq!(t.kind, TargetKind::ClusterJob, "{words}: {:?}", t.evidence);
        assert_eq!(t.cluster.as_ref().unwrap().nodes.len(), 2);
        assert!(t.summary.starts_with("the Ray cluster"), "{}", t.summary);
    }
    let one = Fake {
        slurm: Some(vec![ray(&["head-45af350b"])]),
        ..Fake::default()
    };
    let t = identify_in(&one, "ray").await;
    assert_ne!(t.kind, TargetKind::ClusterJob, "{:?}", t.evidence);
    assert!(t.cluster.is_none());
    let none = identify_in(&Fake::default(), "ray").await;
    assert!(none.cluster.is_none());
}

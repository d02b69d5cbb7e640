//! The steps a runner that windows a run by steps (`py/sp_steps.py`: torch.profiler's and
//! memray's) wrote in its state file: each step's wall, and whether it ended the program.

use system_profile_model::metrics::StepWindow;
use system_profile_model::run::{AfterTrace, TorchSchedule};

pub(crate) struct RunnerSteps {
    /// Steps the program made before it ended or was ended.
    pub steps: u32,
    /// The step after which the runner ended the program (`end_program`).
    pub ended_after_step: Option<u64>,
    pub window: Option<StepWindow>,
}

/// The state's steps on `schedule`, of which `cycles` were traced.
pub(crate) fn of_state(
    state: &serde_json::Value,
    schedule: &TorchSchedule,
    cycles: u32,
) -> RunnerSteps {
    let step_s: Vec<f64> = state["step_s"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_f64()).collect())
        .unwrap_or_default();
    let ended_after_step = state["ended_after_step"].as_u64();
    let after = if ended_after_step.is_some() {
        AfterTrace::EndProgram
    } else {
        AfterTrace::RunOn
    };
    RunnerSteps {
        steps: u32::try_from(step_s.len()).unwrap_or(u32::MAX),
        ended_after_step,
        window: StepWindow::of(&step_s, schedule, cycles, after),
    }
}

//! `custom`: the command as it is, supervised; its output and exit are the measurement.

use crate::*;

pub(crate) async fn custom(input: &RunProfilerInput, place: &RunPlace) -> Result<Execution, RunError> {
    let argv = command_of(input)?;
    let outcome = launch(input, place, &argv, timeout_of(input), |_| {}).await?;
    let mut e = finish(&outcome, argv, place);
    explain_exit(&mut e);
    Ok(e)
}

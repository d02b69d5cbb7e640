//! The NVML sampler where NVML is (every GPU read at the asked rate) and where it is not (an
//! error that says why and what to do, at once, without a thread left running).

use std::time::Duration;
use system_profile_sample::nvml::{nvml, NvmlSampler, NvmlSamplerConfig};

#[test]
fn reads_every_gpu_or_says_why_it_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let jsonl = dir.path().join("nvml.jsonl");
    let started = NvmlSampler::start(NvmlSamplerConfig {
        rate_hz: 20.0,
        jsonl: Some(jsonl.clone()),
        ..Default::default()
    });
    match nvml() {
        Ok(n) => {
            let count = n.device_count().unwrap();
            let sampler = started.unwrap();
            std::thread::sleep(Duration::from_millis(500));
            let s = sampler.stop();
            assert_eq!(s.source, "nvml");
            assert_eq!(s.devices.len() as u32, count);
            assert!(s.rate_hz_achieved.unwrap() > 10.0, "{s:?}");
            assert!(s.sampler_cpu_s.is_some());
            let lines = std::fs::read_to_string(&jsonl).unwrap();
            assert_eq!(lines.lines().count() as u64, s.samples);
            // Asking for a GPU that is not there is refused before anything starts.
            let err = NvmlSampler::start(NvmlSamplerConfig {
                devices: vec![count + 7],
                ..Default::default()
            })
            .err()
            .unwrap();
            assert!(err.to_string().contains("does not exist"), "{err}");
        }
        Err(reason) => {
            let err = started.err().unwrap();
            assert_eq!(err.to_string(), reason);
            assert!(reason.contains("NVML could not be loaded"), "{reason}");
            assert!(reason.contains("--gpus all"), "{reason}");
            assert!(!jsonl.exists(), "nothing written when nothing ran");
        }
    }
}

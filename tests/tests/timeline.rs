//! `stackflow events --stack S --html FILE` after a deploy on the emulator, rendered by
//! headless Chromium (Debian's `chromium`, which `.ci/run` installs): each bar of the
//! screenshot is where the log says, in the colour the log says. The test reads the log
//! itself (`events --json`) and places the bars by the page's documented geometry
//! (`shared/cli/src/timeline.rs`): a row per action in start order (then the log's), `x = 280 + (start -
//! t0) / (t1 - t0) * 800`, the critical path (the chain of dependencies that ended last)
//! orange, the rest blue, the page white around them.

use std::cmp::Reverse;
use std::path::Path;
use std::process::Command;

use serde_json::Value;
use stackflow_tests::cli::Cli;
use stackflow_tests::{Emulator, unique_name};

const LEFT: f64 = 280.0;
const PLOT: f64 = 800.0;
const TOP: f64 = 60.0;
const ROW: f64 = 28.0;
const DONE: [u8; 3] = [0x3b, 0x6e, 0xa8];
const CRITICAL: [u8; 3] = [0xe0, 0x8a, 0x00];
const WHITE: [u8; 3] = [0xff, 0xff, 0xff];

fn millis(at: &str) -> u64 {
    let t = humantime::parse_rfc3339(at).unwrap();
    t.duration_since(std::time::SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A bar as the log gives it.
struct Expected {
    id: String,
    start: u64,
    end: u64,
    dependencies: Vec<String>,
}

/// The last run's actions, by start, and its length (ms), read from `events --json`.
fn from_log(lines: &str) -> (Vec<Expected>, u64) {
    let events: Vec<Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let start = events
        .iter()
        .rposition(|e| e["event"]["type"] == "DeployStarted")
        .expect("a deploy");
    let t0 = millis(events[start]["at"].as_str().unwrap());
    let mut bars: Vec<Expected> = Vec::new();
    let mut t1 = t0;
    for e in &events[start..] {
        let t = millis(e["at"].as_str().unwrap());
        t1 = t1.max(t);
        let ev = &e["event"];
        match ev["type"].as_str().unwrap() {
            "ResourceIntent" => {
                let id = ev["logicalId"].as_str().unwrap().to_string();
                if !bars.iter().any(|b| b.id == id) {
                    bars.push(Expected {
                        id,
                        start: t - t0,
                        end: t - t0,
                        dependencies: vec![],
                    });
                }
            }
            "ResourceCreated" => {
                let r = &ev["resource"];
                let id = r["logicalId"].as_str().unwrap();
                let b = bars.iter_mut().find(|b| b.id == id).unwrap();
                b.end = t - t0;
                b.dependencies = serde_json::from_value(r["dependencies"].clone()).unwrap();
            }
            _ => {}
        }
    }
    // Start order; on the same millisecond, the log's.
    bars.sort_by_key(|b| b.start);
    (bars, t1 - t0)
}

/// "Ended last", as the page documents it: the later end, then the earlier start, then
/// the smaller logical id.
fn last(b: &&Expected) -> (u64, Reverse<u64>, Reverse<String>) {
    (b.end, Reverse(b.start), Reverse(b.id.clone()))
}

/// The ids on the chain that ended last.
fn critical(bars: &[Expected]) -> Vec<String> {
    let mut chain = vec![];
    let mut current = bars.iter().max_by_key(last);
    while let Some(b) = current {
        chain.push(b.id.clone());
        current = bars
            .iter()
            .filter(|d| b.dependencies.contains(&d.id))
            .max_by_key(last);
    }
    chain
}

fn screenshot(page: &Path, png: &Path, height: u32) -> image::Rgb {
    let status = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            &format!("--window-size=1100,{height}"),
            &format!("--screenshot={}", png.display()),
        ])
        .arg(format!("file://{}", page.display()))
        .status()
        .expect("chromium runs (Debian's chromium package: .ci/run installs it)");
    assert!(status.success());
    image::Rgb::read(png)
}

mod image {
    /// A decoded RGB(A) screenshot.
    pub struct Rgb {
        pub width: u32,
        pub height: u32,
        channels: usize,
        data: Vec<u8>,
    }

    impl Rgb {
        pub fn read(path: &std::path::Path) -> Rgb {
            let decoder =
                png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
            let mut reader = decoder.read_info().unwrap();
            let mut data = vec![0; reader.output_buffer_size().unwrap()];
            let info = reader.next_frame(&mut data).unwrap();
            assert_eq!(info.bit_depth, png::BitDepth::Eight);
            let channels = info.color_type.samples();
            data.truncate(info.buffer_size());
            Rgb {
                width: info.width,
                height: info.height,
                channels,
                data,
            }
        }

        pub fn at(&self, x: u32, y: u32) -> [u8; 3] {
            let i = (y as usize * self.width as usize + x as usize) * self.channels;
            [self.data[i], self.data[i + 1], self.data[i + 2]]
        }
    }
}

fn near(a: [u8; 3], b: [u8; 3]) -> bool {
    a.iter().zip(b).all(|(x, y)| x.abs_diff(y) <= 12)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_timeline_of_a_deploy_renders_its_bars_where_the_log_says() {
    let emu = Emulator::shared().await;
    let dir = std::env::temp_dir().join(unique_name("timeline"));
    std::fs::create_dir_all(&dir).unwrap();
    let stack = unique_name("Timeline").replace('_', "-");
    let template = dir.join(format!("{stack}.yaml"));
    std::fs::write(
        &template,
        "Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n  First:\n    Type: AWS::SSM::Parameter\n    Properties:\n      Type: String\n      Value: !GetAtt Queue.Arn\n  Second:\n    Type: AWS::SSM::Parameter\n    Properties:\n      Type: String\n      Value: !GetAtt First.Value\n  Side:\n    Type: AWS::SNS::Topic\n",
    )
    .unwrap();
    let cli = Cli::local(&dir, emu.endpoint().to_string());
    let run = cli.run(&["deploy", template.to_str().unwrap()]);
    assert_eq!(run.code, Some(0), "{}", run.describe());
    let log = cli.run(&["events", "--stack", &stack, "--json"]);
    let (bars, length) = from_log(&log.stdout);
    assert_eq!(bars.len(), 4, "{}", log.stdout);
    let critical = critical(&bars);

    let page = dir.join("timeline.html");
    let drawn = cli.run(&[
        "events",
        "--stack",
        &stack,
        "--html",
        page.to_str().unwrap(),
    ]);
    assert_eq!(drawn.code, Some(0), "{}", drawn.describe());
    let png = dir.join("timeline.png");
    let height = (TOP + ROW * bars.len() as f64 + 40.0) as u32;
    let shot = screenshot(&page, &png, height);
    assert!(shot.width >= 1100 && shot.height >= height - 1);

    let span = length.max(1) as f64;
    for (row, b) in bars.iter().enumerate() {
        let left = LEFT + b.start as f64 / span * PLOT;
        let width = ((b.end - b.start) as f64 / span * PLOT).max(2.0);
        let x = (left + width / 2.0).floor() as u32;
        let y = (TOP + row as f64 * ROW + 5.0 + 9.0) as u32;
        let want = if critical.contains(&b.id) {
            CRITICAL
        } else {
            DONE
        };
        let got = shot.at(x, y);
        assert!(
            near(got, want),
            "{} (row {row}, {}..{} ms of {length}): pixel ({x}, {y}) is {got:?}, not {want:?}",
            b.id,
            b.start,
            b.end
        );
        // Right of the axis, and above the bar in the row's gap: the page.
        assert!(near(shot.at((LEFT + PLOT + 10.0) as u32, y), WHITE));
        assert!(near(
            shot.at(x, (TOP + row as f64 * ROW + 2.0) as u32),
            WHITE
        ));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

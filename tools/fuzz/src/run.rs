//! Running one case: a scratch directory with its input files, the real binary as a subprocess
//! under a wall-clock limit (killed on expiry) and an address-space limit, then the classifier.

use crate::cases::Case;
use crate::classify::{classify, Class, End, Observed};
use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How to run the cases.
#[derive(Clone, Debug)]
pub struct Runner {
    pub bin: PathBuf,
    pub timeout: Duration,
    /// Address-space limit of the child (`ulimit -v`), MiB; 0 = none. An allocation past it fails
    /// at once ("memory allocation of N bytes failed", an ABORT) instead of swapping the machine.
    pub mem_mib: u64,
}

/// stdout past this is a runaway: the child is killed (and the case is a HANG).
const STDOUT_LIMIT: u64 = 64 << 20;
/// How much of stdout and of each output file the non-finite scan reads.
const SCAN_LIMIT: u64 = 16 << 20;

#[derive(Clone, Debug)]
pub struct Result {
    pub class: Class,
    pub detail: String,
    pub end: End,
    pub wall: Duration,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

fn read_prefix(path: &Path, limit: u64) -> Vec<u8> {
    let mut buf = Vec::new();
    if let Ok(f) = File::open(path) {
        let _ = f.take(limit).read_to_end(&mut buf);
    }
    buf
}

impl Runner {
    /// The shell line that runs `case` in its directory, as the harness does.
    fn script(&self, case: &Case, bin: &str) -> String {
        let mut s = String::new();
        if self.mem_mib > 0 {
            s.push_str(&format!("ulimit -v {} 2>/dev/null\n", self.mem_mib * 1024));
        }
        s.push_str(&case.command_line(bin));
        s
    }

    /// Run `case` in `dir` (created; left in place for the caller to remove or keep).
    pub fn run(&self, case: &Case, dir: &Path) -> io::Result<Result> {
        fs::create_dir_all(dir)?;
        for (name, data) in &case.files {
            fs::write(dir.join(name), data)?;
        }
        let out_path = dir.join(".fuzz-stdout");
        let err_path = dir.join(".fuzz-stderr");
        let bin = fs::canonicalize(&self.bin).unwrap_or_else(|_| self.bin.clone());
        let mut cmd = if self.mem_mib > 0 {
            // `exec` keeps the pid: the time-limit kill and the exit signal are the binary's own.
            let mut c = Command::new("/bin/sh");
            c.arg("-c")
                .arg(format!(
                    "ulimit -v {} 2>/dev/null; exec \"$0\" \"$@\"",
                    self.mem_mib * 1024
                ))
                .arg(&bin);
            c
        } else {
            Command::new(&bin)
        };
        cmd.arg(case.command)
            .args(&case.args)
            .current_dir(dir)
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::null())
            .stderr(File::create(&err_path)?);
        if case.closed_stdout {
            // A pipe whose read end is closed before the child starts: every write to stdout
            // fails with EPIPE, deterministically (as `autoplan ... | head` at worst).
            let (reader, writer) = io::pipe()?;
            drop(reader);
            cmd.stdout(writer);
        } else {
            cmd.stdout(File::create(&out_path)?);
        }
        let start = Instant::now();
        let mut child = cmd.spawn()?;
        drop(cmd); // the parent's copies of the pipe's write end and of the files
        let mut poll = Duration::from_millis(1);
        let end = loop {
            if let Some(st) = child.try_wait()? {
                break exit_of(st);
            }
            let runaway = fs::metadata(&out_path).is_ok_and(|m| m.len() > STDOUT_LIMIT);
            if start.elapsed() >= self.timeout || runaway {
                let _ = child.kill();
                let _ = child.wait();
                break End::Killed;
            }
            std::thread::sleep(poll);
            poll = (poll * 2).min(Duration::from_millis(20));
        };
        let wall = start.elapsed();
        let stdout = read_prefix(&out_path, SCAN_LIMIT);
        let stderr = read_prefix(&err_path, 64 << 10);
        let outputs: Vec<Vec<u8>> = case
            .outputs
            .iter()
            .map(|o| read_prefix(&dir.join(o), SCAN_LIMIT))
            .collect();
        let (class, detail) = classify(&Observed {
            end,
            stdout: &stdout,
            stderr: &stderr,
            outputs: &outputs,
            closed_stdout: case.closed_stdout,
            nonsense: case.nonsense.as_deref(),
            result_codes: if case.command == "diff" { &[1] } else { &[] },
        });
        Ok(Result {
            class,
            detail,
            end,
            wall,
            stdout,
            stderr,
        })
    }

    /// Write the reproduction of `case` into `dir`: its input files, `cmd.sh` (run from the
    /// repository root), `case.txt` (what it is and how it ended) and the captured output.
    pub fn write_repro(&self, case: &Case, r: &Result, dir: &Path, rerun: &str) -> io::Result<()> {
        fs::create_dir_all(dir)?;
        for (name, data) in &case.files {
            fs::write(dir.join(name), data)?;
        }
        let bin = self.bin.to_string_lossy();
        let default_bin = if self.bin.is_absolute() {
            bin.to_string()
        } else {
            format!("$PWD/{bin}")
        };
        let mut sh = String::from("#!/bin/sh\n");
        sh.push_str(&format!(
            "# autoplan-fuzz case {}: {} ({})\n",
            case.index,
            r.class,
            r.detail.replace('\n', " ")
        ));
        sh.push_str(&format!("# rerun in the harness: {rerun}\n"));
        sh.push_str("# Run from the repository root: sh PATH/TO/THIS/cmd.sh (AUTOPLAN=... for another binary).\n");
        sh.push_str(&format!("AUTOPLAN=\"${{AUTOPLAN:-{default_bin}}}\"\n"));
        sh.push_str("cd \"$(dirname \"$0\")\" || exit 2\n");
        let mut run = self
            .script(case, "$AUTOPLAN")
            .replace("'$AUTOPLAN'", "\"$AUTOPLAN\"");
        if case.closed_stdout {
            // stdout = a FIFO with no reader left: writes fail with EPIPE, as in the harness.
            sh.push_str(
                "T=$(mktemp -d) && mkfifo \"$T/p\" && exec 4<>\"$T/p\" 5>\"$T/p\" 4<&- && rm -r \"$T\"\n",
            );
            run.push_str(" >&5 5>&-");
        }
        sh.push_str(&run);
        sh.push('\n');
        fs::write(dir.join("cmd.sh"), sh)?;
        let mut txt = format!(
            "case {}\nclass {}\ndetail {}\nend {:?}\nwall {:.3} s\ncommand {}\nclosed stdout {}\nnonsense {}\nrerun {rerun}\nmutations:\n",
            case.index,
            r.class,
            r.detail,
            r.end,
            r.wall.as_secs_f64(),
            case.command_line("autoplan"),
            case.closed_stdout,
            case.nonsense.as_deref().unwrap_or("-"),
        );
        for m in &case.mutations {
            txt.push_str(&format!("  {m}\n"));
        }
        fs::write(dir.join("case.txt"), txt)?;
        fs::write(
            dir.join("stdout.txt"),
            &r.stdout[..r.stdout.len().min(64 << 10)],
        )?;
        fs::write(dir.join("stderr.txt"), &r.stderr)?;
        Ok(())
    }
}

#[cfg(unix)]
fn exit_of(st: std::process::ExitStatus) -> End {
    use std::os::unix::process::ExitStatusExt;
    match (st.code(), st.signal()) {
        (Some(c), _) => End::Exit(c),
        (None, Some(s)) => End::Signal(s),
        (None, None) => End::Exit(-1),
    }
}

#[cfg(not(unix))]
fn exit_of(st: std::process::ExitStatus) -> End {
    End::Exit(st.code().unwrap_or(-1))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// A stand-in for autoplan: a shell script whose behaviour is chosen by the subcommand.
    fn fake_bin(dir: &Path) -> PathBuf {
        let p = dir.join("fake-autoplan");
        fs::write(
            &p,
            "#!/bin/sh\ntrap '' PIPE\ncase \"$1\" in\n\
             ok) echo 'step time 1.5 s, info: Infeasible none' ;;\n\
             nan) echo 'step time NaN µs (fits)' ;;\n\
             err) echo 'error: --top: must be in 1..=1000' >&2; exit 2 ;;\n\
             panic) echo \"thread 'main' panicked at src/x.rs:1:1:\" >&2; echo boom >&2; exit 101 ;;\n\
             abort) kill -ABRT $$ ;;\n\
             hang) exec sleep 30 ;;\n\
             pipe) echo hello || { echo 'error: Broken pipe (os error 32)' >&2; exit 2; } ;;\n\
             esac\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    fn case(cmd: &'static str, closed: bool) -> Case {
        Case {
            index: 0,
            command: cmd,
            args: vec![],
            files: vec![("in.toml".to_owned(), b"x = 1\n".to_vec())],
            outputs: vec![],
            closed_stdout: closed,
            mutations: vec![],
            nonsense: None,
        }
    }

    #[test]
    fn the_runner_classifies_real_processes() {
        let tmp = std::env::temp_dir().join(format!("autoplan-fuzz-test-{}", std::process::id()));
        fs::create_dir_all(&tmp).unwrap();
        let r = Runner {
            bin: fake_bin(&tmp),
            timeout: Duration::from_millis(500),
            mem_mib: 1024,
        };
        let expect = [
            ("ok", false, Class::Ok),
            ("nan", false, Class::NonFinite),
            ("err", false, Class::Error),
            ("panic", false, Class::Panic),
            ("abort", false, Class::Abort),
            ("hang", false, Class::Hang),
            ("pipe", true, Class::BrokenPipe),
        ];
        for (i, (cmd, closed, class)) in expect.into_iter().enumerate() {
            let k = case(cmd, closed);
            let d = tmp.join(format!("case{i}"));
            let res = r.run(&k, &d).unwrap();
            assert_eq!(res.class, class, "{cmd}: {} {:?}", res.detail, res.end);
            assert!(d.join("in.toml").exists());
            r.write_repro(&k, &res, &tmp.join(format!("repro{i}")), "rerun")
                .unwrap();
            let sh = fs::read_to_string(tmp.join(format!("repro{i}/cmd.sh"))).unwrap();
            assert!(sh.contains(&format!("\"$AUTOPLAN\" {cmd}")), "{sh}");
        }
        // The reproduction of the closed-pipe case fails the same way when run by sh.
        let out = Command::new("/bin/sh")
            .arg(tmp.join("repro6/cmd.sh"))
            .env("AUTOPLAN", r.bin.as_os_str())
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        fs::remove_dir_all(&tmp).unwrap();
    }
}

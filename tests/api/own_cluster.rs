//! A PostgreSQL cluster of a drill's own: `initdb` into a temporary directory and `pg_ctl` on a
//! free port, so a drill may stop, crash or starve it without touching the shared server on 5432.
//! Run as the `postgres` user when the tests run as root (PostgreSQL refuses root).
//! [`OwnRedis`]: a Redis of a drill's own, likewise, beside the shared one on 6379.

use std::path::PathBuf;
use std::process::Command;

pub struct OwnCluster {
    bin: PathBuf,
    pub dir: PathBuf,
    pub port: u16,
    /// The server's `max_connections`.
    pub max_connections: u32,
}

/// The newest installed PostgreSQL's `bin` directory.
fn pg_bin() -> Option<PathBuf> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("initdb").exists())
        .collect();
    versions.sort_by_key(|p| {
        p.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    versions.pop()
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|v| v.split_whitespace().next().map(|u| u == "0"))
        })
        .unwrap_or(false)
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl OwnCluster {
    /// A new cluster, started; `None` (the drill is skipped) where PostgreSQL's server binaries
    /// are not installed, except under `CI=true`, where that fails the drill.
    pub fn start() -> Option<Self> {
        Self::start_with_max_connections(60)
    }

    /// [`OwnCluster::start`] with `max_connections` connection slots (superuser slots included:
    /// the drills connect as `postgres`).
    pub fn start_with_max_connections(max_connections: u32) -> Option<Self> {
        let Some(bin) = pg_bin() else {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI needs PostgreSQL's server binaries (initdb, pg_ctl) for the drills"
            );
            eprintln!("skipping the drill: no /usr/lib/postgresql/*/bin/initdb");
            return None;
        };
        let dir = std::env::temp_dir().join(format!("drill-pg-{}", uuid::Uuid::new_v4().simple()));
        let c = Self {
            bin,
            dir,
            port: free_port(),
            max_connections,
        };
        c.run(
            "initdb",
            &[
                "-D",
                &c.dir.to_string_lossy(),
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
            ],
        );
        c.pg_ctl_start();
        Some(c)
    }

    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    fn run(&self, tool: &str, args: &[&str]) {
        let program = self.bin.join(tool);
        let out = if is_root() {
            Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(&program)
                .args(args)
                .output()
        } else {
            Command::new(&program).args(args).output()
        }
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
        assert!(
            out.status.success(),
            "{tool} {args:?} failed: {}{}\nserver log:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
        );
    }

    /// Starts the server (again) and waits until it accepts connections.
    pub fn pg_ctl_start(&self) {
        let dir = self.dir.to_string_lossy();
        let opts = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {dir} -c fsync=off -c max_connections={}",
            self.port, self.max_connections
        );
        self.run(
            "pg_ctl",
            &[
                "-D",
                &dir,
                "-o",
                &opts,
                "-l",
                &format!("{dir}/log"),
                "-w",
                "start",
            ],
        );
    }

    /// A clean, fast shutdown (`pg_ctl stop -m fast`): connections are closed.
    pub fn stop(&self) {
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.dir.to_string_lossy(),
                "-m",
                "fast",
                "-w",
                "stop",
            ],
        );
    }

    /// A crash: `kill -9` of the postmaster; the next start runs crash recovery. Waits until its
    /// backends, which notice the postmaster's death, are gone (a new postmaster refuses to start
    /// beside them); one that lingers past 5 s is killed too.
    pub fn crash(&self) {
        let pid = std::fs::read_to_string(self.dir.join("postmaster.pid"))
            .ok()
            .and_then(|s| s.lines().next().map(|l| l.trim().to_owned()))
            .expect("postmaster.pid");
        let children: Vec<String> = Command::new("pgrep")
            .args(["-P", &pid])
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let status = Command::new("kill")
            .args(["-9", &pid])
            .status()
            .expect("kill");
        assert!(status.success());
        let alive = |p: &String| std::path::Path::new(&format!("/proc/{p}")).exists();
        let started = std::time::Instant::now();
        // Polling for the processes to exit, not waiting for a fixed time.
        while children.iter().chain(std::iter::once(&pid)).any(alive) {
            if started.elapsed() > std::time::Duration::from_secs(5) {
                for c in children.iter().filter(|c| alive(c)) {
                    let _ = Command::new("kill").args(["-9", c]).status();
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        let dir = self.dir.to_string_lossy().into_owned();
        let program = self.bin.join("pg_ctl");
        let args = ["-D", dir.as_str(), "-m", "immediate", "-w", "stop"];
        let _ = if is_root() {
            Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(&program)
                .args(args)
                .output()
        } else {
            Command::new(&program).args(args).output()
        };
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A `redis-server` of a drill's own on a free port, without persistence (`--save ""`,
/// `--appendonly no`): started again after [`OwnRedis::stop`], it starts empty.
pub struct OwnRedis {
    child: Option<std::process::Child>,
    pub port: u16,
}

impl OwnRedis {
    /// A new Redis, started and answering `PING`; `None` (the drill is skipped) where
    /// `redis-server` is not installed, except under `CI=true`, where that fails the drill.
    pub fn start() -> Option<Self> {
        let installed = Command::new("redis-server")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !installed {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI needs redis-server for the drills"
            );
            eprintln!("skipping the drill: no redis-server");
            return None;
        }
        let mut r = Self {
            child: None,
            port: free_port(),
        };
        r.start_again();
        Some(r)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts the server (again, on the same port) and waits until it answers `PING`.
    pub fn start_again(&mut self) {
        use std::process::Stdio;
        assert!(self.child.is_none(), "already running");
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--daemonize", "no"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        self.child = Some(child);
        let started = std::time::Instant::now();
        // Polling for the server to answer, not waiting for a fixed time.
        while !self.answers_ping() {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(10),
                "redis-server on port {} does not answer",
                self.port
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    fn answers_ping(&self) -> bool {
        use std::io::{Read, Write};
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(std::time::Duration::from_millis(500)));
        let mut answer = [0u8; 7];
        s.write_all(b"PING\r\n").is_ok()
            && s.read_exact(&mut answer).is_ok()
            && &answer == b"+PONG\r\n"
    }

    /// Stops the server (SIGTERM: Redis closes its clients and exits) and waits for the exit.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let _ = child.wait();
        }
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

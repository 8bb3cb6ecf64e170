//! The lean connection driver: one process (the report starts several) that holds many client
//! connections with nothing but the wire protocol — Hello, Connect, Open of one queue, then a
//! put every interval — so that the harness is not what limits the connect rate or the memory.
//! Each connection is a small task; heartbeats from the queue manager are answered.
//!
//! It talks to the report over its standard streams: it prints `connected N ERRORS SECONDS
//! FIRST_ERROR` once every connection has been tried, then reads lines on its standard input:
//! `quiet` stops the puts (the connections stay, answering the queue manager's heartbeats),
//! `count` prints `heartbeats N` (heartbeats answered so far), and anything else or the input's
//! end disconnects every conversation, closes every socket and prints `closed`.

use std::io::{BufRead, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use ferrymq_proto::{
    encode_request, encode_response, kind, parse_response, FrameDecoder, Hello, RawFrame, Request,
    Response,
};
use ferrymq_types::Reason;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// Connections handshaking at once in one driver process.
const IN_FLIGHT_MAX: usize = 256;
/// A connect, handshake, Connect and Open not finished in this time counts as an error.
const SETUP_TIMEOUT: Duration = Duration::from_secs(60);
/// The small body each connection puts.
const BODY_BYTES: usize = 64;

/// Heartbeats from the queue manager answered so far, over every connection of this driver.
static HEARTBEATS: AtomicU64 = AtomicU64::new(0);

/// What the held connections are told to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// A put every interval.
    Put,
    /// No puts: nothing but the queue manager's heartbeats and their answers.
    Quiet,
    /// Disconnect and close.
    Stop,
}

/// What one driver process is asked to do.
#[derive(Debug, Clone)]
pub struct Plan {
    pub qm: String,
    pub port: u16,
    pub queue: String,
    pub count: usize,
    pub source: IpAddr,
    pub put_interval: Duration,
}

struct Tally {
    errors: AtomicU64,
    first_error: Mutex<Option<String>>,
}

/// Makes `p.count` connections, at most [`IN_FLIGHT_MAX`] handshaking at once: the connections
/// made, how many failed and the first failure.
pub async fn connect_all(p: &Plan) -> (Vec<Conn>, u64, Option<String>) {
    let tally = Arc::new(Tally {
        errors: AtomicU64::new(0),
        first_error: Mutex::new(None),
    });
    let gate = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT_MAX));
    let mut setups = Vec::with_capacity(p.count);
    for _ in 0..p.count {
        let p = p.clone();
        let (gate, tally) = (gate.clone(), tally.clone());
        setups.push(tokio::spawn(async move {
            let permit = gate.acquire_owned().await.expect("open");
            let c = tokio::time::timeout(SETUP_TIMEOUT, setup(&p)).await;
            drop(permit);
            match c {
                Ok(Ok(c)) => Some(c),
                Ok(Err(e)) => fail(&tally, e),
                Err(_) => fail(&tally, "setup timed out".into()),
            }
        }));
    }
    let mut made = Vec::with_capacity(p.count);
    for s in setups {
        if let Ok(Some(c)) = s.await {
            made.push(c);
        }
    }
    let first = tally.first_error.lock().unwrap().clone();
    (made, tally.errors.load(Ordering::Relaxed), first)
}

/// Runs one driver process to its end (the `--driver` mode of `report connections`).
pub fn run(p: Plan) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async move {
        let started = Instant::now();
        let (made, errors, first) = connect_all(&p).await;
        let secs = started.elapsed().as_secs_f64();
        let (mode_tx, mode_rx) = tokio::sync::watch::channel(Mode::Put);
        let n = made.len().max(1);
        let held: Vec<_> = made
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                // Puts spread over the interval, so that they do not all come at once.
                let offset = p.put_interval.mul_f64(i as f64 / n as f64);
                tokio::spawn(hold(c, p.put_interval, offset, mode_rx.clone()))
            })
            .collect();
        println!(
            "connected {} {errors} {secs:.3} {}",
            held.len(),
            first.unwrap_or_default().replace('\n', " ")
        );
        let _ = std::io::stdout().flush();
        // The report's words, until one to close (or the end of the input).
        let _ = tokio::task::spawn_blocking(move || loop {
            let mut line = String::new();
            if std::io::stdin().lock().read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            match line.trim() {
                "quiet" => {
                    let _ = mode_tx.send(Mode::Quiet);
                }
                "count" => {
                    println!("heartbeats {}", HEARTBEATS.load(Ordering::Relaxed));
                    let _ = std::io::stdout().flush();
                }
                _ => {
                    let _ = mode_tx.send(Mode::Stop);
                    return;
                }
            }
        })
        .await;
        for h in held {
            let _ = h.await;
        }
        println!("closed");
        let _ = std::io::stdout().flush();
        Ok(())
    })
}

fn fail<T>(t: &Tally, e: String) -> Option<T> {
    t.errors.fetch_add(1, Ordering::Relaxed);
    t.first_error.lock().unwrap().get_or_insert(e);
    None
}

/// A connection after its setup: the socket, what is left of its read buffer, its handle.
#[derive(Debug)]
pub struct Conn {
    s: TcpStream,
    buf: BytesMut,
    dec: FrameDecoder,
    hobj: u32,
    next_req: u32,
}

async fn setup(p: &Plan) -> Result<Conn, String> {
    let sock = TcpSocket::new_v4().map_err(|e| format!("socket: {e}"))?;
    sock.bind(SocketAddr::new(p.source, 0))
        .map_err(|e| format!("bind {}: {e}", p.source))?;
    let s = sock
        .connect(SocketAddr::from(([127, 0, 0, 1], p.port)))
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let _ = s.set_nodelay(true);
    let mut c = Conn {
        s,
        buf: BytesMut::with_capacity(512),
        dec: FrameDecoder::new(ferrymq_proto::PRE_HANDSHAKE_FRAME_MAX_BYTES),
        hobj: 0,
        next_req: 1,
    };
    // Heartbeats: the queue manager's (the larger of both ends wins).
    let hello = Hello {
        heartbeat_ms: 0,
        sharecnv: 1,
        ..Hello::new("conn-driver")
    };
    match c.call(0, &Request::Hello(hello)).await? {
        Response::HelloOk { max_msg_len, .. } => c
            .dec
            .set_max_frame_bytes(ferrymq_proto::frame_limit_for(max_msg_len)),
        other => return Err(status_text("Hello", other)),
    }
    let connect = Request::Connect {
        qmgr: p.qm.clone(),
        user: String::new(),
        password: String::new(),
        app_name: "conn-driver".into(),
    };
    match c.call(1, &connect).await? {
        Response::Status {
            reason: Reason::NONE,
            ..
        } => {}
        other => return Err(status_text("Connect", other)),
    }
    let open = Request::Open {
        name: p.queue.clone(),
        qmgr: String::new(),
        options: ferrymq_types::options::open::OUTPUT,
        dynamic_name: String::new(),
    };
    match c.call(1, &open).await? {
        Response::Opened { hobj, .. } => c.hobj = hobj,
        other => return Err(status_text("Open", other)),
    }
    // An idle connection keeps no large buffer of its own either.
    c.buf = BytesMut::new();
    Ok(c)
}

fn status_text(what: &str, r: Response) -> String {
    match r {
        Response::Status { reason, message } => {
            format!(
                "{what}: {} ({}): {message}",
                reason.mq_name(),
                reason.code()
            )
        }
        other => format!("{what}: answered {}", other.name()),
    }
}

impl Conn {
    async fn send(&mut self, conv: u16, r: &Request) -> Result<(), String> {
        let mut out = BytesMut::new();
        let req = self.next_req;
        self.next_req += 1;
        encode_request(conv, req, r, &mut out);
        self.s
            .write_all(&out)
            .await
            .map_err(|e| format!("write: {e}"))
    }

    /// The next frame, heartbeats answered on the way.
    async fn frame(&mut self) -> Result<RawFrame, String> {
        loop {
            while let Some(f) = self.dec.decode(&mut self.buf).map_err(|e| e.to_string())? {
                if f.kind == kind::HEARTBEAT {
                    HEARTBEATS.fetch_add(1, Ordering::Relaxed);
                    let mut out = BytesMut::new();
                    encode_response(0, f.req, &Response::HeartbeatAck, &mut out);
                    self.s
                        .write_all(&out)
                        .await
                        .map_err(|e| format!("write: {e}"))?;
                    continue;
                }
                return Ok(f);
            }
            self.buf.reserve(1024);
            if self
                .s
                .read_buf(&mut self.buf)
                .await
                .map_err(|e| format!("read: {e}"))?
                == 0
            {
                return Err("the queue manager closed the connection".into());
            }
        }
    }

    async fn call(&mut self, conv: u16, r: &Request) -> Result<Response, String> {
        self.send(conv, r).await?;
        let f = self.frame().await?;
        parse_response(&f).map_err(|e| e.to_string())
    }
}

/// Holds a connection: a put every `interval` (the first after `offset`) until told to be quiet,
/// replies and heartbeats read, until told to stop; then a Disconnect and a clean close.
async fn hold(
    mut c: Conn,
    interval: Duration,
    offset: Duration,
    mut mode: tokio::sync::watch::Receiver<Mode>,
) {
    let mut next = tokio::time::Instant::now() + offset;
    let body = bytes::Bytes::from(vec![b'x'; BODY_BYTES]);
    let mut putting = true;
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(next), if putting => {
                next += interval;
                let put = Request::Put {
                    hobj: c.hobj,
                    opts: Default::default(),
                    md: Default::default(),
                    props: Default::default(),
                    body: body.clone(),
                };
                if c.send(1, &put).await.is_err() {
                    return;
                }
            }
            f = c.frame() => {
                // A put's reply; nothing else is expected.
                if f.is_err() {
                    return;
                }
                // Nothing held between puts.
                if c.buf.is_empty() {
                    c.buf = BytesMut::new();
                }
            }
            r = mode.changed() => {
                let m = *mode.borrow_and_update();
                if r.is_err() || m == Mode::Stop {
                    break;
                }
                putting = m == Mode::Put;
            }
        }
    }
    close(c).await;
}

/// Ends a connection cleanly: its Disconnect answered, then the socket closed.
pub async fn close(mut c: Conn) {
    let _ = c.send(1, &Request::Disconnect).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), c.frame()).await;
    let _ = c.s.shutdown().await;
}

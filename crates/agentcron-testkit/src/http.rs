//! A small real HTTP/1.1 server on 127.0.0.1:0 for action tests: it records
//! every request and answers from a script of replies (the last one repeats).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use tokio::sync::mpsc;

/// One recorded request.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// Header names in lower case.
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

/// How to answer one request.
#[derive(Clone, Debug)]
pub enum Reply {
    Respond {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// Never answer (until the server is dropped).
    Hang,
    /// Answer 200 with `body` after `delay` (a slow agent).
    Slow {
        delay: std::time::Duration,
        body: String,
    },
}

pub fn ok(body: &str) -> Reply {
    Reply::Respond {
        status: 200,
        headers: vec![],
        body: body.into(),
    }
}

pub fn status(code: u16, headers: &[(&str, &str)]) -> Reply {
    Reply::Respond {
        status: code,
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        body: format!("status {code}"),
    }
}

pub struct TestServer {
    pub url: String,
    pub requests: mpsc::UnboundedReceiver<Request>,
    _task: tokio::task::JoinHandle<()>,
}

impl TestServer {
    pub async fn start(script: Vec<Reply>) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = mpsc::unbounded_channel();
        let script = Arc::new(Mutex::new((script, 0usize)));
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                let tx = tx.clone();
                let script = script.clone();
                tokio::spawn(async move {
                    let Some(req) = read_request(&mut socket).await else {
                        return;
                    };
                    let reply = {
                        let mut s = script.lock().unwrap();
                        let i = s.1.min(s.0.len() - 1);
                        s.1 += 1;
                        s.0[i].clone()
                    };
                    let _ = tx.send(req);
                    let reply = match reply {
                        Reply::Slow { delay, body } => {
                            tokio::time::sleep(delay).await;
                            ok(&body)
                        }
                        other => other,
                    };
                    match reply {
                        Reply::Hang | Reply::Slow { .. } => std::future::pending::<()>().await,
                        Reply::Respond {
                            status,
                            headers,
                            body,
                        } => {
                            let mut head = format!(
                                "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n",
                                body.len()
                            );
                            for (k, v) in headers {
                                head.push_str(&format!("{k}: {v}\r\n"));
                            }
                            head.push_str("\r\n");
                            let _ = socket.write_all(head.as_bytes()).await;
                            let _ = socket.write_all(body.as_bytes()).await;
                            let _ = socket.shutdown().await;
                        }
                    }
                });
            }
        });
        TestServer {
            url,
            requests: rx,
            _task: task,
        }
    }

    /// The next request, within 5 s.
    pub async fn next(&mut self) -> Request {
        tokio::time::timeout(std::time::Duration::from_secs(5), self.requests.recv())
            .await
            .expect("a request arrived within 5 s")
            .expect("server running")
    }
}

async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<Request> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, path) = (first.next()?.to_string(), first.next()?.to_string());
    let headers: BTreeMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Request {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

//! A blocking client of the management interface: connect, answer the
//! challenge when one is posed, send commands, read framed responses.

use crate::protocol::{parse_status_line, STATUS_LINE_LEN};
use crate::status;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Why talking to the management interface failed.
#[derive(Debug)]
pub enum ClientError {
    Io(std::io::Error),
    /// The peer did not frame its response as the protocol says.
    Protocol(String),
    /// A challenge came and no secret was given, or the answer was refused.
    Auth(String),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Io(e) => write!(f, "{e}"),
            ClientError::Protocol(e) => write!(f, "protocol error: {e}"),
            ClientError::Auth(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for ClientError {}

impl From<std::io::Error> for ClientError {
    fn from(e: std::io::Error) -> Self {
        ClientError::Io(e)
    }
}

/// One connection to a management interface.
pub struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    /// The banner the server greeted with, after authentication.
    pub banner: String,
}

impl Client {
    /// Connects to `addr` (`host:port`), authenticating with the contents
    /// of the secret file if the server asks. `timeout` bounds every read.
    pub fn connect(
        addr: &str,
        secret: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<Client, ClientError> {
        let stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(timeout))?;
        let writer = stream.try_clone()?;
        let mut client = Client {
            reader: BufReader::new(stream),
            writer,
            banner: String::new(),
        };
        let (mut code, mut body) = client.read_response()?;
        if code == status::AUTH {
            let Some(secret) = secret else {
                return Err(ClientError::Auth(
                    "Authentication required (no secret file given)".to_string(),
                ));
            };
            let challenge = body.get(..32).unwrap_or("").to_string();
            let answer = crate::auth_response(&challenge, secret);
            (code, body) = client.send_line(&format!("auth {answer}"))?;
            if code != status::OK {
                return Err(ClientError::Auth(format!(
                    "Authentication failed (status {code})"
                )));
            }
        }
        if code != status::OK {
            return Err(ClientError::Protocol(format!(
                "greeted with status {code}: {}",
                body.trim_end()
            )));
        }
        client.banner = body;
        Ok(client)
    }

    /// Sends one command line (a newline is added) and reads the answer.
    pub fn send_line(&mut self, line: &str) -> Result<(u16, String), ClientError> {
        let mut text = line.to_string();
        text.push('\n');
        self.writer.write_all(text.as_bytes())?;
        self.read_response()
    }

    /// Sends arguments joined by blanks, as `varnishadm` does: quoting is
    /// the caller's, so `'"a b"'` arrives as one argument.
    pub fn send_args<S: AsRef<str>>(&mut self, args: &[S]) -> Result<(u16, String), ClientError> {
        let line: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
        self.send_line(&line.join(" "))
    }

    /// Reads one framed response.
    pub fn read_response(&mut self) -> Result<(u16, String), ClientError> {
        let mut line = Vec::with_capacity(STATUS_LINE_LEN);
        self.reader.read_until(b'\n', &mut line)?;
        if line.is_empty() {
            return Err(ClientError::Protocol("connection closed".to_string()));
        }
        let (code, len) = parse_status_line(&line).ok_or_else(|| {
            ClientError::Protocol(format!(
                "bad status line {:?}",
                String::from_utf8_lossy(&line)
            ))
        })?;
        let mut body = vec![0u8; len + 1];
        self.reader.read_exact(&mut body)?;
        body.pop();
        Ok((code, String::from_utf8_lossy(&body).into_owned()))
    }
}

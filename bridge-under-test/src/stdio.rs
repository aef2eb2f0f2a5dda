//! stdio between two processes, modelled as in-memory pipes carrying newline-delimited JSON.
//! When one end is dropped (its process exited or crashed) the other reads EOF.

use tokio::io::{duplex, DuplexStream};

/// Pipe capacity: large enough that a well-behaved reader never blocks a writer for long.
const PIPE_BYTES: usize = 1 << 20;

/// The client's ends: it writes the server's stdin and reads the server's stdout.
pub struct ClientEnds {
    pub stdin: DuplexStream,
    pub stdout: DuplexStream,
}

/// The server's (bridge's) ends.
pub struct ServerEnds {
    pub stdin: DuplexStream,
    pub stdout: DuplexStream,
}

/// A fresh pair of pipes joining a client process to a server process.
pub fn pipes() -> (ClientEnds, ServerEnds) {
    let (client_stdin, server_stdin) = duplex(PIPE_BYTES);
    let (client_stdout, server_stdout) = duplex(PIPE_BYTES);
    (
        ClientEnds { stdin: client_stdin, stdout: client_stdout },
        ServerEnds { stdin: server_stdin, stdout: server_stdout },
    )
}

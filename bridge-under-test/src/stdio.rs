//! stdio between two processes, modelled as in-memory pipes carrying newline-delimited JSON.
//! When one end is dropped (its process exited or crashed) the other reads EOF.

use tokio::io::{duplex, AsyncWriteExt, DuplexStream};

use crate::rng::SimRng;

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

/// Write `bytes` in one to three pieces cut at seeded points, yielding between them, so the
/// reader's line framing meets partial lines (a real pipe promises no write boundaries).
pub async fn write_chopped(
    pipe: &mut DuplexStream,
    bytes: &[u8],
    rng: &mut SimRng,
) -> std::io::Result<()> {
    let mut rest = bytes;
    while !rest.is_empty() {
        let cut = match rng.below(3) {
            0 if rest.len() > 1 => 1 + rng.below(rest.len() as u64 - 1) as usize,
            _ => rest.len(),
        };
        pipe.write_all(&rest[..cut]).await?;
        pipe.flush().await?;
        rest = &rest[cut..];
        if !rest.is_empty() {
            tokio::task::yield_now().await;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, BufReader};

    #[tokio::test]
    async fn chopped_writes_arrive_whole_and_in_order() {
        let (mut client, server) = pipes();
        let mut rng = SimRng::new(3);
        let lines: Vec<String> = (0..50).map(|i| format!("{{\"line\":{i}}}")).collect();
        for line in &lines {
            write_chopped(&mut client.stdin, format!("{line}\n").as_bytes(), &mut rng).await.unwrap();
        }
        drop(client);
        let mut read = Vec::new();
        let mut reader = BufReader::new(server.stdin).lines();
        while let Some(line) = reader.next_line().await.unwrap() {
            read.push(line);
        }
        assert_eq!(read, lines);
    }
}

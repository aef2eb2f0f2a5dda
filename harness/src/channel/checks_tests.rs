//! Unit tests for the channel checkers (filled below).

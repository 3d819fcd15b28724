"""What a run leaves: the run directory (its only owner, `store`), the typed cell records, the
leaderboard's statistics and rendering, the CI gate, and comparisons with published figures."""

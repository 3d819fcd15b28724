"""Every empirical audit dpgym runs, beside the ledgers' re-accounting (which proves nothing
empirically and needs none):

- `game`: `dpgym audit`, the distinguishing game: many fits on neighbouring datasets, attacked,
  and a Clopper–Pearson lower bound on ε (docs/privacy.md#empirical-audits);
- `canary`: the one-run audit of Steinke, Nasr & Jagielski (2023): one fit with canaries, certified
  by their bound and by the f-DP bound of Mahloujifar, Melis & Chaudhuri (2024)
  (docs/privacy.md#one-run-audit). The DP-SGD engine's side of it, the gradient canaries, lives with
  the engine (`dpgym.privacy.canaries`), which reads them when a phase is planned;
- `learners`: the private-learning track's measures and its plausibility audit (permuted labels);
- `matching`: which audit speaks for which leaderboard row;
- `statistics`: the binomial intervals they share.
"""

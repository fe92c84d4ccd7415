"""Population-risk training experiments of PAPERS.md P2 (grokking; PINN and preference tasks to come)."""

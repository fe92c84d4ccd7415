"""Self-contained experiments of PAPERS.md P2: grokking, the noisy PINN and noisy-label DPO (preference)."""

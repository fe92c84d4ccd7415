"""The P2 tasks as modules of the experiment protocol (`growcert.experiments` says the protocol and holds the
registry): grokking, pinn, preference, theory. Each is a light module that `growcert --help` imports for
its HELP; the training and report code it wires stays in `growcert.experiments.<task>` and `<task>_report`,
imported inside its functions."""

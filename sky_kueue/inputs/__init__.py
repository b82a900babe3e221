"""The input boundary: every file, YAML document and CSV text the CLI and servers read.

Why one package: bad input must give one line and exit code 2 everywhere (issue 17), and
the limits that make that true (file kind and size, YAML depth and alias expansion) only
hold if every entry point reads through the same code. Pure apart from reading files; the
model, the plugin config, the simulator and the policy server all import it.
"""

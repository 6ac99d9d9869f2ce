"""Spack without Spack: `netbench spack-check` checks spack.yaml against
what Spack's packages offer (`check`), from the facts recorded of them
(`facts`, data/spack-builtin-packages.json and spack_repo/), with a parser
of Spack's spec syntax (`spec`)."""

"""What a run reads of the machine it runs on: the MPI builds this node
offers (`discovery`), a link's line rate and class (`linerate`), a node's
tuning-relevant settings, read by the job on every node (`nodestate`),
and the checkout's commit and `spack.lock` hash (`checkout`)."""

"""Finding the slow node or link of a fleet from a sweep of every pair of
nodes (#17): the judgement (`judge`) and the drain script an operator may
review (`drain`).  Pure Python: no ReFrame, no subprocess, no network."""

"""The layout shared by the trainer's compiled merge loop and the code that drives it.

:mod:`tokenizer.training.train_kernel` (the loop, compiled by numba) and :mod:`tokenizer.training.compiled_merges` (which loads
it and runs it in batches) pass the merger's scalars in one small int64 array, ``state``, so that the compiled
functions can update them in place. This module names the slots of that array and the answers the loop gives
in ``state[STATUS]``; numba reads these names as constants when it compiles. It imports nothing, so the driver
does not need numba to read them, and neither of the two modules imports the other for them.
"""

# How many pairs the best one is looked for among (see train_kernel._best).
CANDIDATES = 512

# state[...]: the merger's scalars.
NUM_PAIRS, SLOTS_USED, BYTES_USED, NUM_TOKENS, NUM_CANDIDATES, THRESHOLD, STATUS, NEED_PAIRS, NEED_SLOTS, \
    NEED_BYTES = range(10)

# state[STATUS] after merge_until: finished the merges asked for; no pair left to merge; an array must grow
# (NEED_* say how much); the best pair is not one (a defect, reported).
DONE, NO_PAIR_LEFT, NEED_ROOM, NOT_A_PAIR = range(4)

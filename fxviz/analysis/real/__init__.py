"""Real tensors: ``measure`` (what the user's real compiled step keeps for its backward), ``replay``
(each partition run on real tensors), ``gradients`` (gradients against eager autograd),
``runtime_args`` (the inputs AOTAutograd's runtime hands a graph).
"""

"""Model or function + example inputs -> joint forward+backward graph(s) with every node named.

Three routes, all ending in the graph AOTAutograd hands its partitioner:

* ``dynamo`` (default for ``params="lifted"``): ``torch.compile`` with an AOTAutograd backend, as
  ``torch.compile`` users run it.  Parameters are graph inputs; module paths and source lines are
  recorded; data-dependent Python (``.item()``, ``if x.sum() > 0``) becomes graph breaks and
  several joint graphs instead of an error.
* ``aot``: ``aot_function`` over ``torch.func.functional_call`` with fake tensors: no weights are
  touched or computed, so meta-device and billion-parameter models trace in little memory; no
  module paths, no graph breaks (data-dependent Python is an error).
* ``params="closure"``: ``aot_function`` on a function that closes over the model, the situation
  of fxviz's founding story: parameters become ``_param_constant`` ``get_attr`` nodes and get no
  gradient.

Whatever the route, fxviz runs the model on its own copy of the example inputs (a forward that
writes into its inputs never reaches the caller's tensors) inside ``preserved`` (parameters,
buffers, ``.grad``, flags and RNG are put back bitwise).  The default loss depends on what the
model returns: on the dynamo route it is chosen (and ``loss_fn`` checked) inside the traced step
itself (``loss.TracedLoss``); otherwise (meta models, the aot and closure routes, inductor, dynamic
shapes, and whenever the traced choice cannot decide) one forward first learns the output's
structure (an eager one on fxviz's copy of the inputs, fake on meta) and the state is restored
before the trace.

Meta-device tensors are traced as fake CPU tensors: on the meta device some ops (``nll_loss``, so
``cross_entropy``) have no autograd kernel and would silently drop the whole backward.  When the
loss still ends up independent of every parameter that requires grad, ``Capture.warnings`` says so

Modules: ``graphs`` (the ``JointGraph`` / ``Capture`` types and ``graph_name``), ``loss`` (the default
loss), ``inputs`` (names and checks of what the user passed), ``routes`` (``capture`` and its routes).
"""

from __future__ import annotations

from .graphs import INFERENCE_NOTE, Capture, JointGraph, graph_name, graph_of
from .inputs import BACKENDS, CAPTURE_ROUTES, PARAM_MODES
from .routes import capture

__all__ = ["JointGraph", "Capture", "capture", "graph_name", "graph_of", "INFERENCE_NOTE", "PARAM_MODES",
           "CAPTURE_ROUTES", "BACKENDS"]

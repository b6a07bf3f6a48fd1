"""``tf.train``: cluster description, device placement, optimizers, the global step, input
pipelines, checkpoints and managed sessions.

Book sections: "Multiple Devices Across Multiple Servers" (``ClusterSpec``), "Sharding
Variables Across Multiple Parameter Servers" (``replica_device_setter``), "Distributing
TensorFlow" (optimizers, whose updates run on the variables' ps tasks, and the global step) and
"Managing sessions" (Supervisor, MonitoredTrainingSession, hooks, coordinators, checkpoints).
``summary_iterator`` reads event files back; ``SummaryWriter`` is the pre-1.0 name of
``tf.summary.FileWriter``, gone from TF 1.15 and kept here for the blog posts that use it.
"""

from minitf.distributed.cluster_spec import ClusterSpec  # noqa: F401
from minitf.framework.graph_io import write_graph  # noqa: F401
from minitf.summary.writer import FileWriter as SummaryWriter  # noqa: F401  (pre-1.0 name)
from minitf.summary.writer import summary_iterator  # noqa: F401

# -- optimizers, the global step, learning-rate decay (part 2 §17) --------------------------
from minitf.train.adagrad import AdagradOptimizer  # noqa: F401
from minitf.train.adam import AdamOptimizer  # noqa: F401
from minitf.train.basic_session_run_hooks import (  # noqa: F401
    CheckpointSaverHook,
    CheckpointSaverListener,
    LoggingTensorHook,
    NanLossDuringTrainingError,
    NanTensorHook,
    SecondOrStepTimer,
    StepCounterHook,
    StopAtStepHook,
    SummarySaverHook,
)

# -- checkpoints (tf.train.Saver and friends) --------------------------------------------------
from minitf.train.checkpoint_management import (  # noqa: F401
    CheckpointState,
    checkpoint_exists,
    generate_checkpoint_state_proto,
    get_checkpoint_mtimes,
    get_checkpoint_state,
    latest_checkpoint,
    remove_checkpoint,
    update_checkpoint_state,
)
from minitf.train.checkpoint_utils import (  # noqa: F401
    NewCheckpointReader,
    list_variables,
    load_checkpoint,
    load_variable,
)
from minitf.train.coordinator import Coordinator, LooperThread  # noqa: F401
from minitf.train.device_setter import replica_device_setter  # noqa: F401
from minitf.train.gradient_descent import GradientDescentOptimizer  # noqa: F401
from minitf.train.input import (  # noqa: F401  (TF's python/training/input.py)
    batch,
    batch_join,
    input_producer,
    limit_epochs,
    range_input_producer,
    shuffle_batch,
    shuffle_batch_join,
    slice_input_producer,
    string_input_producer,
)
from minitf.train.learning_rate_decay import (  # noqa: F401
    exponential_decay,
    piecewise_constant,
)
from minitf.train.meta_graph import export_meta_graph, import_meta_graph  # noqa: F401
from minitf.train.momentum import MomentumOptimizer  # noqa: F401
from minitf.train.monitored_session import (  # noqa: F401
    ChiefSessionCreator,
    MonitoredSession,
    MonitoredTrainingSession,
    Scaffold,
    SessionCreator,
    SingularMonitoredSession,
    WorkerSessionCreator,
)
from minitf.train.optimizer import Optimizer  # noqa: F401
from minitf.train.queue_runner import (  # noqa: F401
    QueueRunner,
    add_queue_runner,
    start_queue_runners,
)
from minitf.train.rmsprop import RMSPropOptimizer  # noqa: F401
from minitf.train.saver import Saver, SaverDef  # noqa: F401
from minitf.train.session_manager import SessionManager  # noqa: F401
from minitf.train.session_run_hook import (  # noqa: F401
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)
from minitf.train.supervisor import Supervisor  # noqa: F401
from minitf.train.sync_replicas_optimizer import SyncReplicasOptimizer  # noqa: F401
from minitf.train.training_util import (  # noqa: F401
    assert_global_step,
    create_global_step,
    get_global_step,
    get_or_create_global_step,
    global_step,
)


def __getattr__(name):  # Server pulls in grpcio: imported on first use only
    if name == "Server":
        from minitf.distributed.server import Server

        return Server
    raise AttributeError("module 'minitf.train' has no attribute %r" % name)

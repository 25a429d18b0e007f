"""The model zoo: two small Keras models for the bundled digits and ResNet-50 for ImageNet-style data.

TensorFlow is imported inside the functions so that the command-line modules can offer MODEL_NAMES
without loading it. Every model outputs float32 logits, also under the mixed_float16 policy (the
softmax and the loss stay in float32).
"""

MODEL_NAMES = ("mlp", "cnn", "resnet50")
# Models whose training-mode forward pass mixes the samples of a batch (batch normalisation): they
# must never see weight-0 filler samples (see sharding.py).
BATCH_NORM_MODELS = frozenset({"resnet50"})

# ResNet-50: bottleneck blocks per stage and the stage's bottleneck width (output = 4x).
RESNET50_STAGES = ((3, 64), (4, 128), (6, 256), (3, 512))
# Batch-norm settings of the reference ResNet-50 training recipes (TF official models, NVIDIA's
# DeepLearningExamples): a faster-moving average than Keras' 0.99 default, so evaluation statistics
# follow the weights within an epoch or two.
BN_MOMENTUM = 0.9
BN_EPSILON = 1e-5


def uses_batch_norm(name):
    return name in BATCH_NORM_MODELS


def input_shape(data, image_size):
    """The model's input for a data set (manifest.Manifest): square RGB crops for the imagenet layout."""
    return (image_size, image_size, 3) if data.layout == "imagenet" else data.feature_shape


def _mlp(layers, input_shape, num_classes, width):
    del width
    inputs = layers.Input(input_shape)
    x = layers.Flatten()(inputs)
    x = layers.Dense(128, activation="relu")(x)
    x = layers.Dense(64, activation="relu")(x)
    return inputs, x


def _cnn(layers, input_shape, num_classes, width):
    del width
    # No batch normalisation: with --last-batch pad the weight-0 filler would enter its batch statistics.
    inputs = layers.Input(input_shape)
    x = layers.Conv2D(32, 3, padding="same", activation="relu")(inputs)
    x = layers.Conv2D(64, 3, padding="same", activation="relu")(x)
    x = layers.MaxPooling2D()(x)
    x = layers.Flatten()(x)
    x = layers.Dense(128, activation="relu")(x)
    return inputs, x


def _batch_norm(layers, name, zero_gamma=False):
    return layers.BatchNormalization(
        momentum=BN_MOMENTUM,
        epsilon=BN_EPSILON,
        gamma_initializer="zeros" if zero_gamma else "ones",
        name=name,
    )


def _bottleneck(layers, x, filters, stride, name):
    """ResNet v1.5 bottleneck: the stride sits on the 3x3 convolution, as in torchvision and NVIDIA's
    recipe; the last batch norm of the residual branch starts at zero, so each block starts as the
    identity (Goyal et al., 2017), which keeps large-batch warm-up stable."""
    shortcut = x
    if stride != 1 or x.shape[-1] != 4 * filters:
        shortcut = layers.Conv2D(4 * filters, 1, strides=stride, use_bias=False, name=f"{name}_proj")(x)
        shortcut = _batch_norm(layers, f"{name}_proj_bn")(shortcut)
    y = layers.Conv2D(filters, 1, use_bias=False, name=f"{name}_conv1")(x)
    y = layers.ReLU()(_batch_norm(layers, f"{name}_bn1")(y))
    y = layers.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False, name=f"{name}_conv2")(y)
    y = layers.ReLU()(_batch_norm(layers, f"{name}_bn2")(y))
    y = layers.Conv2D(4 * filters, 1, use_bias=False, name=f"{name}_conv3")(y)
    y = _batch_norm(layers, f"{name}_bn3", zero_gamma=True)(y)
    return layers.ReLU()(layers.Add()([shortcut, y]))


def _resnet50(layers, input_shape, num_classes, width):
    """ResNet-50 v1.5; `width` scales every layer's channels (1.0 is the standard network)."""

    def channels(count):
        return max(4, int(round(count * width)))

    inputs = layers.Input(input_shape)
    x = layers.Conv2D(channels(64), 7, strides=2, padding="same", use_bias=False, name="stem_conv")(inputs)
    x = layers.ReLU()(_batch_norm(layers, "stem_bn")(x))
    x = layers.MaxPooling2D(3, strides=2, padding="same")(x)
    for stage, (blocks, filters) in enumerate(RESNET50_STAGES):
        for block in range(blocks):
            stride = 2 if block == 0 and stage > 0 else 1
            x = _bottleneck(layers, x, channels(filters), stride, f"stage{stage + 2}_block{block + 1}")
    x = layers.GlobalAveragePooling2D()(x)
    return inputs, x


_BUILDERS = {"mlp": _mlp, "cnn": _cnn, "resnet50": _resnet50}


def build_model(name, input_shape, num_classes, width=1.0):
    """An uncompiled model that outputs float32 logits."""
    import tensorflow as tf

    layers = tf.keras.layers
    inputs, features = _BUILDERS[name](layers, tuple(input_shape), num_classes, width)
    # float32 logits under any precision policy: the softmax in the loss needs the range.
    logits = layers.Dense(num_classes, dtype="float32", name="logits")(features)
    return tf.keras.Model(inputs, logits, name=name)


def no_decay_variables(model):
    """The variables weight decay leaves alone: batch-norm scales and offsets and biases, i.e. every
    1-D trainable variable (kernels have 2 or more dimensions). Decaying them hurts accuracy."""
    return [variable for variable in model.trainable_variables if len(variable.shape) == 1]


def compile_model(model, optimizer):
    import tensorflow as tf

    model.compile(
        optimizer=optimizer,
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        # weighted_metrics honour the per-sample weights, so filler samples do not count.
        weighted_metrics=[tf.keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        jit_compile=False,  # XLA, when asked for, comes from auto-clustering (train.py)
    )

"""The model zoo: small Keras models for the bundled 8x8 digits (any image shape works).

TensorFlow is imported inside the functions so that the command-line modules can offer MODEL_NAMES
without loading it.
"""

MODEL_NAMES = ("mlp", "cnn")


def _mlp(layers, input_shape, num_classes):
    return [
        layers.Flatten(input_shape=input_shape),
        layers.Dense(128, activation="relu"),
        layers.Dense(64, activation="relu"),
        layers.Dense(num_classes),
    ]


def _cnn(layers, input_shape, num_classes):
    # No batch normalisation: the weight-0 filler samples would leak into its batch statistics.
    return [
        layers.Conv2D(32, 3, padding="same", activation="relu", input_shape=input_shape),
        layers.Conv2D(64, 3, padding="same", activation="relu"),
        layers.MaxPooling2D(),
        layers.Flatten(),
        layers.Dense(128, activation="relu"),
        layers.Dense(num_classes),
    ]


_BUILDERS = {"mlp": _mlp, "cnn": _cnn}


def build_model(name, input_shape, num_classes):
    """An uncompiled model that outputs logits."""
    import tensorflow as tf

    return tf.keras.Sequential(_BUILDERS[name](tf.keras.layers, tuple(input_shape), num_classes), name=name)


def compile_model(model, optimizer):
    import tensorflow as tf

    model.compile(
        optimizer=optimizer,
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        # weighted_metrics honour the per-sample weights, so filler samples do not count.
        weighted_metrics=[tf.keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
    )

"""The model zoo: small Keras models for the bundled 8x8 digits (any image shape works)."""

import tensorflow as tf

MODEL_NAMES = ("mlp", "cnn")


def _mlp(input_shape, num_classes):
    return [
        tf.keras.layers.Flatten(input_shape=input_shape),
        tf.keras.layers.Dense(128, activation="relu"),
        tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dense(num_classes),
    ]


def _cnn(input_shape, num_classes):
    # No batch normalisation: the weight-0 filler samples would leak into its batch statistics.
    return [
        tf.keras.layers.Conv2D(32, 3, padding="same", activation="relu", input_shape=input_shape),
        tf.keras.layers.Conv2D(64, 3, padding="same", activation="relu"),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(128, activation="relu"),
        tf.keras.layers.Dense(num_classes),
    ]


_BUILDERS = {"mlp": _mlp, "cnn": _cnn}


def build_model(name, input_shape, num_classes):
    """An uncompiled model that outputs logits."""
    return tf.keras.Sequential(_BUILDERS[name](tuple(input_shape), num_classes), name=name)


def compile_model(model, optimizer):
    model.compile(
        optimizer=optimizer,
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        # weighted_metrics honour the per-sample weights, so filler samples do not count.
        weighted_metrics=[tf.keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
    )

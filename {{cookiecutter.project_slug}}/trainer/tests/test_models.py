"""The model zoo: ResNet-50's structure, widths and float32 logits; which variables weight decay skips."""

import tensorflow as tf

from horovod_trainer import models


def layers_of(model, kind):
    return [layer for layer in model.layers if isinstance(layer, kind)]


def test_resnet50_has_the_standard_depth_at_any_width():
    full = models.build_model("resnet50", (224, 224, 3), 1000)
    narrow = models.build_model("resnet50", (32, 32, 3), 4, width=0.125)
    for model in (full, narrow):
        # 1 stem + 16 blocks x 3 + 4 projections = 53 convolutions, each followed by a batch norm.
        assert len(layers_of(model, tf.keras.layers.Conv2D)) == 53
        assert len(layers_of(model, tf.keras.layers.BatchNormalization)) == 53
    # torchvision's resnet50 (the same v1.5 network, 1000 classes) has 25,557,032 parameters.
    trainable = sum(int(tf.size(variable)) for variable in full.trainable_variables)
    assert trainable == 25_557_032
    assert narrow.count_params() < full.count_params() / 30
    assert full.output_shape == (None, 1000)


def test_each_block_starts_as_the_identity():
    model = models.build_model("resnet50", (32, 32, 3), 4, width=0.125)
    last_norms = [layer for layer in model.layers if layer.name.endswith("_bn3")]
    assert len(last_norms) == 16
    assert all(float(tf.reduce_max(tf.abs(layer.gamma))) == 0.0 for layer in last_norms)


def test_logits_stay_float32_under_mixed_precision():
    tf.keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        model = models.build_model("resnet50", (32, 32, 3), 4, width=0.125)
        assert model.get_layer("stem_conv").compute_dtype == "float16"
        assert model(tf.zeros((1, 32, 32, 3))).dtype == tf.float32
    finally:
        tf.keras.mixed_precision.set_global_policy("float32")


def test_weight_decay_skips_batch_norm_and_biases_only():
    model = models.build_model("resnet50", (32, 32, 3), 4, width=0.125)
    skipped = {id(variable) for variable in models.no_decay_variables(model)}
    for variable in model.trainable_variables:
        is_norm_or_bias = any(part in variable.name for part in ("gamma", "beta", "bias"))
        assert (id(variable) in skipped) == is_norm_or_bias, variable.name

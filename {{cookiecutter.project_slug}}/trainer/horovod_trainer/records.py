"""The TFRecord schema: one tf.train.Example per sample."""

import tensorflow as tf

# image: flattened float features in [0, 1]; label: class index; id: the sample's index in its split
# (kept so that tests and debugging can check which samples a rank saw).
FEATURES = ("image", "label", "id")


def encode(image, label, sample_id) -> bytes:
    example = tf.train.Example(
        features=tf.train.Features(
            feature={
                "image": tf.train.Feature(float_list=tf.train.FloatList(value=[float(v) for v in image])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
                "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(sample_id)])),
            }
        )
    )
    return example.SerializeToString()


def decoder(feature_shape):
    """A tf.data map function: serialized Example -> {"image", "label", "id"} tensors."""
    flat_size = 1
    for dim in feature_shape:
        flat_size *= dim
    spec = {
        "image": tf.io.FixedLenFeature([flat_size], tf.float32),
        "label": tf.io.FixedLenFeature([], tf.int64),
        "id": tf.io.FixedLenFeature([], tf.int64),
    }

    def decode(serialized):
        parsed = tf.io.parse_single_example(serialized, spec)
        parsed["image"] = tf.reshape(parsed["image"], feature_shape)
        return parsed

    return decode

"""The TFRecord schemas: one tf.train.Example per sample, in either layout (see manifest.py).

A parser turns a serialized Example into `{"image", "label", "id"}`; for the imagenet layout "image"
is still the encoded JPEG (decoding and cropping happen in images.py, after the shuffle, so the
shuffle window holds small strings and not decoded images).
"""

import tensorflow as tf

# features layout. image: flattened float features in [0, 1]; label: class index; id: the sample's
# index in its split (kept so that tests and debugging can check which samples a rank saw).
FEATURES = ("image", "label", "id")
# imagenet layout: the keys TensorFlow's build_imagenet_data.py writes (tensorflow/models,
# research/inception/inception/data/build_imagenet_data.py, `_convert_to_example`).
IMAGENET_ENCODED = "image/encoded"
IMAGENET_LABEL = "image/class/label"
NO_ID = -1


def _int64(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))


def _bytes(value):
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))


def encode(image, label, sample_id) -> bytes:
    example = tf.train.Example(
        features=tf.train.Features(
            feature={
                "image": tf.train.Feature(float_list=tf.train.FloatList(value=[float(v) for v in image])),
                "label": _int64([label]),
                "id": _int64([sample_id]),
            }
        )
    )
    return example.SerializeToString()


def encode_imagenet(jpeg: bytes, label: int, height: int, width: int, filename: str, synset: str) -> bytes:
    """An Example with the fields build_imagenet_data.py writes (bounding boxes left out)."""
    feature = {
        "image/encoded": _bytes(jpeg),
        "image/format": _bytes(b"JPEG"),
        "image/colorspace": _bytes(b"RGB"),
        "image/channels": _int64([3]),
        "image/height": _int64([height]),
        "image/width": _int64([width]),
        "image/class/label": _int64([label]),
        "image/class/synset": _bytes(synset.encode()),
        "image/filename": _bytes(filename.encode()),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def parser(manifest):
    """A tf.data map function for the manifest's layout: serialized Example -> {"image", "label", "id"}."""
    if manifest.layout == "imagenet":
        spec = {
            IMAGENET_ENCODED: tf.io.FixedLenFeature([], tf.string),
            IMAGENET_LABEL: tf.io.FixedLenFeature([], tf.int64),
        }
        offset = manifest.label_offset

        def parse_imagenet(serialized):
            parsed = tf.io.parse_single_example(serialized, spec)
            return {
                "image": parsed[IMAGENET_ENCODED],
                "label": parsed[IMAGENET_LABEL] - offset,
                "id": tf.constant(NO_ID, tf.int64),
            }

        return parse_imagenet
    return decoder(manifest.feature_shape)


def decoder(feature_shape):
    """features layout: serialized Example -> {"image", "label", "id"} tensors."""
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

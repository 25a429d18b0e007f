"""JPEG decoding and augmentation for the imagenet layout, the usual ResNet-50 recipe.

Training: a random crop covering 8% to 100% of the image with an aspect ratio between 3/4 and 4/3
(Inception-style "random resized crop"), resized to the training size, flipped left-right half the
time. Evaluation: a centre crop of size/(size + 32) of the shorter side, resized to the same size (the
crop TensorFlow's official ResNet uses: 224 of 256). Only the crop window is decoded
(`decode_and_crop_jpeg`), which saves most of the decode work for small crops.

Randomness is stateless, keyed by (epoch seed, position in the rank's stream): a resumed epoch sees the
same crops as an uninterrupted one.
"""

import tensorflow as tf

# Per-channel RGB mean and standard deviation of ImageNet, in 0-255 units.
MEAN_RGB = (123.68, 116.78, 103.94)
STDDEV_RGB = (58.40, 57.12, 57.38)
CROP_PADDING = 32
AREA_RANGE = (0.08, 1.0)
ASPECT_RATIO_RANGE = (3 / 4, 4 / 3)


def _normalise(image):
    return (image - tf.constant(MEAN_RGB)) / tf.constant(STDDEV_RGB)


def _resize(image, size):
    return tf.image.resize(image, [size, size], method="bilinear")


def train_image(jpeg, size, seed):
    """Random resized crop + flip; `seed` is an int64 tensor of shape [2]."""
    crop_seed, flip_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    shape = tf.image.extract_jpeg_shape(jpeg)
    begin, crop_size, _ = tf.image.stateless_sample_distorted_bounding_box(
        shape,
        bounding_boxes=tf.constant([0.0, 0.0, 1.0, 1.0], shape=[1, 1, 4]),
        seed=crop_seed,
        min_object_covered=0.1,
        aspect_ratio_range=ASPECT_RATIO_RANGE,
        area_range=AREA_RANGE,
        max_attempts=10,
        use_image_if_no_bounding_boxes=True,
    )
    offset_y, offset_x, _ = tf.unstack(begin)
    height, width, _ = tf.unstack(crop_size)
    image = tf.image.decode_and_crop_jpeg(jpeg, tf.stack([offset_y, offset_x, height, width]), channels=3)
    image = tf.image.stateless_random_flip_left_right(_resize(image, size), seed=flip_seed)
    return _normalise(image)


def eval_image(jpeg, size):
    shape = tf.image.extract_jpeg_shape(jpeg)
    height, width = shape[0], shape[1]
    side = tf.cast(
        tf.cast(size, tf.float32) / (size + CROP_PADDING) * tf.cast(tf.minimum(height, width), tf.float32), tf.int32
    )
    window = tf.stack([(height - side + 1) // 2, (width - side + 1) // 2, side, side])
    image = tf.image.decode_and_crop_jpeg(jpeg, window, channels=3)
    return _normalise(_resize(image, size))

"""ROS layer of recorded data: the bag recorder and the DDS bag player."""

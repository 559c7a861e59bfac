throw new Error("the fake tsx was resolved through the wrong condition");
